"""Shared pieces of the benchmarks: a bridge process, a lean SSE reader, the mock over stdio."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    started_s: float  # spawn -> first healthy /v1/health

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


# The server's first line names the address it listens on (plain or inside a JSON log record).
STARTUP_LINE = re.compile(r"acp-rest-bridge listening on (http://[^;\s\"]+);")


@contextmanager
def bridge(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, root: Path = ROOT, lines: list[str] | None = None
) -> Iterator[Server]:
    """A bridge server on a port it picks (read from its start-up line), run from the source tree
    ``root`` (another checkout to compare versions). Its stderr goes on to ours (and into ``lines``)."""
    argv = [sys.executable, "-m", "app", "server", "--port", "0", "--data-dir", str(data_dir), *args]
    full_env = {"ACP_BRIDGE_MAX_SESSIONS": "0", **os.environ, **(env or {})}  # benchmarks run hundreds
    # Loopback only: the ACP registry's published catalog is not fetched unless a URL is given.
    full_env.setdefault("ACP_BRIDGE_ACP_REGISTRY_URL", "")
    full_env["PYTHONPATH"] = str(root) + os.pathsep + full_env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=full_env, cwd=data_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    urls: queue.Queue[str | None] = queue.Queue()

    def relay() -> None:
        assert proc.stderr is not None
        announced = False
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            sys.stderr.write(line)
            if lines is not None:
                lines.append(line)
            match = None if announced else STARTUP_LINE.search(line)
            if match:
                announced = True
                urls.put(match.group(1))
        if not announced:
            urls.put(None)  # it exited first

    threading.Thread(target=relay, name="bridge-stderr", daemon=True).start()
    try:
        try:
            url = urls.get(timeout=30)
        except queue.Empty:
            raise RuntimeError("bridge printed no start-up line in 30 s") from None
        if url is None:
            raise RuntimeError(f"bridge exited with {proc.wait(5)}")
        with httpx.Client(timeout=1) as client:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"bridge exited with {proc.returncode}")
                try:
                    if client.get(url + "/v1/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.perf_counter() - t0 > 30:
                    raise RuntimeError("bridge did not become healthy in 30 s")
                time.sleep(0.005)  # fine-grained: the time to healthy is a figure of the benchmarks
        yield Server(url, proc, time.perf_counter() - t0)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SSEReader:
    """Reads an SSE response with as little client work as possible: frames split on blank lines,
    ``data:`` parsed as JSON (the legacy rules)."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.iter_raw()
        self._buffer = b""
        self._frames: list[bytes] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        while not self._frames:
            chunk = next(self._chunks)
            self._buffer += chunk
            *frames, self._buffer = self._buffer.split(b"\n\n")
            self._frames = frames[::-1]
        frame = self._frames.pop()
        for line in frame.split(b"\n"):
            if line.startswith(b"data:"):
                return json.loads(line[5:])  # type: ignore[no-any-return]
        return next(self)  # a comment frame


BURST_AGENT = [sys.executable, str(ROOT / "bench" / "burst_agent.py")]
MOCK_AGENT = [sys.executable, "-m", "app.agents.mock"]


def agents_file(directory: Path) -> Path:
    """An agents file with the benchmark agent as ``burst``."""
    path = directory / "agents.toml"
    path.write_text(f"[agents.burst]\ncommand = {json.dumps(BURST_AGENT)}\n")
    return path


class StdioAgent:
    """An agent driven directly over stdio (no bridge): the agent's own pace."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            bufsize=1 << 20,
        )
        self._id = 0
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.session_id = self.call("session/new", {"cwd": str(ROOT), "mcpServers": []})["sessionId"]

    def _send(self, method: str, params: dict[str, Any]) -> int:
        self._id += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}).encode()
        )
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()
        return self._id

    def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self._send(method, params)
        assert self.proc.stdout is not None
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return message.get("result")

    def prompt_counting(self, text: str) -> tuple[int, float]:
        """Notifications received for one prompt, and seconds from sending it to its answer."""
        t0 = time.perf_counter()
        request_id = self._send(
            "session/prompt", {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        )
        count = 0
        assert self.proc.stdout is not None
        while True:
            message = json.loads(self.proc.stdout.readline())
            if "method" in message:
                count += 1
            elif message.get("id") == request_id:
                return count, time.perf_counter() - t0

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


def parse_sse_frames(text: str) -> list[dict[str, Any]]:
    """The legacy rules: split on blank lines, keep the data: lines, parse them as JSON."""
    events = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].strip() for line in frame.split("\n") if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


class RawHTTP:
    """A keep-alive HTTP/1.1 connection on a plain socket: a client that costs microseconds per
    request, so a latency benchmark measures the server (an httpx client adds 1-3 ms per request)."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.host = f"{host}:{port}"  # a loopback Host: a server without a token serves no other name
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def send(self, method: str, path: str, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        self.sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def response(self) -> tuple[int, bytes]:
        """Status and body of a response with a Content-Length (or none)."""
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), body

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        self.send(method, path, body)
        return self.response()

    def open_stream(self, path: str) -> None:
        """Send a GET and consume its response head; the body then arrives through ``read_until``."""
        self.send("GET", path)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(head.split(b"\r\n")[0].decode())

    def read_until(self, marker: bytes) -> None:
        """Read the stream until ``marker`` has arrived; drop what came up to and including it."""
        while (at := self.buffer.find(marker)) < 0:
            self._fill()
        self.buffer = self.buffer[at + len(marker) :]

    def close(self) -> None:
        self.sock.close()
