"""The bridge next to sandbox-agent 0.4.2 (the Rust ACP-over-HTTP server, "the anchor"), same machine,
same stdlib ACP agent (``bench/burst_agent.py``), measured interleaved, printed as ratios.

Run from the repository root (not part of the test suite; a few minutes)::

    .venv/bin/python -m bench.compare                 # everything
    .venv/bin/python -m bench.compare turns startup   # some of it: turns startup memory burst fanout
    .venv/bin/python -m bench.compare turns --against DIR  # the turns of the bridge from DIR too, same rounds

The anchor is the npm package ``@sandbox-agent/cli-linux-x64@0.4.2`` (a prebuilt binary), installed
with npm into ``~/.cache/acp-rest-bridge-bench`` (``ACP_BRIDGE_BENCH_CACHE`` to move it) on first use.
It runs on 127.0.0.1 with telemetry off and its data dir in a temporary directory, where its built-in
``mock`` agent is replaced by a launcher of the benchmark agent, so both servers drive the same agent
process. Its ACP-over-HTTP surface: ``POST /v1/acp/{id}?agent=mock`` (JSON-RPC in, the response out)
and ``GET /v1/acp/{id}`` (SSE of everything the agent writes).

What is compared (bridge / anchor):

- turn round trip with ``http.client``: ``POST .../messages/stream`` read to its end / the ACP
  ``session/prompt`` POST read to its response;
- the same with a plain-socket client and an open SSE reader: ``POST .../messages`` then
  ``turn.ended`` on SSE / the prompt POST then its response frame on SSE;
- the same with httpx (``AsyncClient``) and an open SSE reader;
- server CPU per turn for each of those, from ``/proc/<pid>/stat`` (user + system, all threads);
- cold start (spawn -> first 200 from ``/v1/health``), idle RSS with one idle session (next to the
  floor of this stack: a FastAPI application with one route under the same uvicorn, uvloop and
  httptools, measured in the same run), RSS per idle session, a 10,000-chunk burst to one SSE reader
  (rate, server CPU per event and loss), one burst to 100 SSE readers;
- the server CPU of ``GET /v1/agents`` next to that of ``GET /v1/health`` (the bridge's own ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .common import BURST_AGENT, ROOT, RawHTTP, agents_file, free_port, percentile

ANCHOR_PACKAGE = "@sandbox-agent/cli-linux-x64"
ANCHOR_VERSION = "0.4.2"
PROMPT = "Reply with exactly the single word OK."
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the two servers ------------------------------------------------------------------------------
def anchor_binary() -> Path:
    """The anchor's binary, installed with npm into the cache dir the first time."""
    cache = Path(os.environ.get("ACP_BRIDGE_BENCH_CACHE", Path.home() / ".cache" / "acp-rest-bridge-bench"))
    prefix = cache / f"sandbox-agent-{ANCHOR_VERSION}"
    binary = prefix / "node_modules" / ANCHOR_PACKAGE / "bin" / "sandbox-agent"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("bench.compare needs npm to install the anchor (sandbox-agent)")
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"{ANCHOR_PACKAGE}@{ANCHOR_VERSION}"],
            check=True,
            timeout=600,
        )
    return binary


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads (also those that have exited)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], t0: float, path: str = "/v1/health") -> float:
    """Seconds from ``t0`` to the first 200 from ``path`` (polled every millisecond or so)."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                conn.close()
                return time.perf_counter() - t0
            conn.close()
        except OSError:
            pass
        if time.perf_counter() - t0 > 30:
            raise RuntimeError("server not healthy within 30 s")
        time.sleep(0.001)


@dataclass
class Running:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    started_s: float
    # Spawn -> the first answer that needs the whole API (the bridge builds its HTTP application
    # after it answers health); the anchor's whole API is up when it is healthy.
    ready_s: float = 0.0
    sessions: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # The server's own CPU (user + system) when it first answered healthy: what the wall time of a
    # start-up is made of on a loaded machine, where the wall time also counts waiting for a core.
    started_cpu_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Bridge:
    """This project's server with the benchmark agent as ``burst``."""

    name = "bridge"

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root  # the source tree the server runs from (another checkout to compare versions)

    # Turn markers in the SSE stream: a delta of the agent's reply, and the end of the turn.
    chunk_marker = b'"type":"item.delta"'
    end_marker = b'"type":"turn.ended"'

    @contextmanager
    def run(self, env: dict[str, str] | None = None) -> Iterator[Running]:
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            argv = [sys.executable, "-m", "app", "server", "--port", str(port), "--data-dir", f"{tmp}/data"]
            argv += ["--agents-file", str(agents_file(Path(tmp)))]
            full_env = {"ACP_BRIDGE_MAX_SESSIONS": "0", **os.environ, **(env or {})}  # benchmarks run hundreds
            full_env["PYTHONPATH"] = str(self.root) + os.pathsep + full_env.get("PYTHONPATH", "")
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, env=full_env, cwd=tmp, stdout=subprocess.DEVNULL)
            try:
                healthy = _wait_healthy(port, proc, t0)
                cpu = cpu_seconds(proc.pid)
                running = Running(self.name, port, proc, healthy, _wait_healthy(port, proc, t0, "/v1/sessions"))
                running.started_cpu_s = cpu
                yield running
            finally:
                _stop(proc)

    def new_session(self, server: Running) -> str:
        server.sessions += 1
        sid = f"s{server.sessions}"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request(
            "POST", f"/v1/sessions/{sid}", json.dumps({"agent": "burst"}), {"content-type": "application/json"}
        )
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status == 200, response.status
        return sid

    def stream_path(self, sid: str) -> str:
        return f"/v1/sessions/{sid}/events/sse"  # a new session: nothing to replay but its start

    def round_trip(self, sid: str, text: str) -> tuple[str, str, bytes]:
        """The one request that runs a turn and answers when it is over."""
        return "POST", f"/v1/sessions/{sid}/messages/stream", json.dumps({"message": text}).encode()

    def send(self, sid: str, text: str) -> tuple[str, str, bytes]:
        """The request that starts a turn (its end is seen on the SSE stream)."""
        return "POST", f"/v1/sessions/{sid}/messages", json.dumps({"message": text}).encode()


class Anchor:
    """sandbox-agent 0.4.2 with its ``mock`` agent replaced by the benchmark agent."""

    name = "anchor"
    chunk_marker = b"agent_message_chunk"
    end_marker = b'"stopReason"'

    def __init__(self) -> None:
        self.binary = anchor_binary()
        self._ids = 0

    @contextmanager
    def run(self, env: dict[str, str] | None = None) -> Iterator[Running]:
        with tempfile.TemporaryDirectory() as tmp:
            launcher = Path(tmp) / "xdg" / "sandbox-agent" / "bin" / "agent_processes" / "mock-acp"
            launcher.parent.mkdir(parents=True)
            launcher.write_text("#!/bin/sh\nexec " + " ".join(map(_sh_quote, BURST_AGENT)) + "\n")
            launcher.chmod(0o755)
            port = free_port()
            full_env = {**os.environ, **(env or {}), "XDG_DATA_HOME": f"{tmp}/xdg", "HOME": tmp}
            full_env["SANDBOX_AGENT_REQUIRE_PREINSTALL"] = "1"  # never install anything
            argv = [str(self.binary), "server", "--no-token", "--no-telemetry", "-H", "127.0.0.1", "-p", str(port)]
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, env=full_env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                healthy = _wait_healthy(port, proc, t0)
                yield Running(self.name, port, proc, healthy, healthy, started_cpu_s=cpu_seconds(proc.pid))
            finally:
                _stop(proc)

    def _rpc(self, method: str, params: dict[str, Any]) -> bytes:
        self._ids += 1
        return json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}).encode()

    def new_session(self, server: Running) -> str:
        server.sessions += 1
        sid = f"s{server.sessions}"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        headers = {"content-type": "application/json", "accept": "application/json"}
        for path, body in (
            (f"/v1/acp/{sid}?agent=mock", self._rpc("initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
            (f"/v1/acp/{sid}", self._rpc("session/new", {"cwd": str(ROOT), "mcpServers": []})),
        ):
            conn.request("POST", path, body, headers)
            response = conn.getresponse()
            data = response.read()
            assert response.status == 200, (response.status, data)
        conn.close()
        return sid

    def stream_path(self, sid: str) -> str:
        return f"/v1/acp/{sid}"

    def round_trip(self, sid: str, text: str) -> tuple[str, str, bytes]:
        prompt = {"sessionId": "burst-session", "prompt": [{"type": "text", "text": text}]}
        return "POST", f"/v1/acp/{sid}", self._rpc("session/prompt", prompt)

    send = round_trip


Server = Bridge | Anchor

FLOOR_APP = """
import sys
import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/v1/health")
async def health() -> dict:
    return {"status": "ok"}


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools", ws="none",
            log_level="warning", access_log=False)
"""


class Floor:
    """A FastAPI application with one route under uvicorn (uvloop, httptools): what any server of
    this stack holds before it does anything."""

    name = "floor"

    @contextmanager
    def run(self) -> Iterator[Running]:
        port = free_port()
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", FLOOR_APP, str(port)], stdout=subprocess.DEVNULL)
        try:
            healthy = _wait_healthy(port, proc, t0)
            yield Running(self.name, port, proc, healthy, healthy)
        finally:
            _stop(proc)


def _sh_quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


# ---- turns ------------------------------------------------------------------------------------------
HEADERS = {"content-type": "application/json", "accept": "application/json"}


Mark = Callable[[], None]


def turns_http_client(
    kind: Server, server: Running, sid: str, turns: int, warmup: int = 0, mark: Mark = lambda: None
) -> list[float]:
    """``http.client`` on one keep-alive connection: the round-trip request, read to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    samples = []
    for index in range(warmup + turns):
        if index == warmup:
            mark()
        method, path, body = kind.round_trip(sid, PROMPT)
        t0 = time.perf_counter()
        conn.request(method, path, body, HEADERS)
        response = conn.getresponse()
        data = response.read()
        if index >= warmup:
            samples.append((time.perf_counter() - t0) * 1000)
        assert response.status == 200 and kind.end_marker in data, (response.status, data[:300])
    conn.close()
    return samples


def turns_raw_sse(
    kind: Server, server: Running, sid: str, turns: int, warmup: int = 0, mark: Mark = lambda: None
) -> list[float]:
    """A plain-socket client (microseconds per request): send the turn, wait for its end on SSE."""
    control, stream = RawHTTP(server.url), RawHTTP(server.url)
    samples = []
    try:
        stream.open_stream(kind.stream_path(sid))
        for index in range(warmup + turns):
            if index == warmup:
                mark()
            method, path, body = kind.send(sid, PROMPT)
            t0 = time.perf_counter()
            control.sock.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: {control.host}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            stream.read_until(kind.end_marker)
            status, _ = control.response()
            if index >= warmup:
                samples.append((time.perf_counter() - t0) * 1000)
            assert status in (200, 204), status
    finally:
        control.close()
        stream.close()
    return samples


async def _turns_httpx(kind: Server, server: Running, sid: str, turns: int, warmup: int, mark: Mark) -> list[float]:
    samples = []
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        client.stream("GET", kind.stream_path(sid), headers={"accept": "text/event-stream"}) as response,
    ):
        chunks = response.aiter_raw()
        buffer = b""
        for index in range(warmup + turns):
            if index == warmup:
                mark()
            method, path, body = kind.send(sid, PROMPT)
            t0 = time.perf_counter()
            posted = asyncio.ensure_future(client.request(method, path, content=body, headers=HEADERS))
            while kind.end_marker not in buffer:
                buffer += await chunks.__anext__()
            buffer = buffer[buffer.index(kind.end_marker) + len(kind.end_marker) :]
            assert (await posted).status_code in (200, 204)
            if index >= warmup:
                samples.append((time.perf_counter() - t0) * 1000)
    return samples


def turns_httpx(
    kind: Server, server: Running, sid: str, turns: int, warmup: int = 0, mark: Mark = lambda: None
) -> list[float]:
    """httpx's AsyncClient, one event loop for the POSTs and the SSE reader."""
    return asyncio.run(_turns_httpx(kind, server, sid, turns, warmup, mark))


@dataclass
class TurnFigures:
    samples: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    turns: int = 0

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.turns * 1e6


class CpuClock:
    """The server's CPU from ``start`` (called once the warm-up turns are done) to ``elapsed``."""

    def __init__(self, server: Running) -> None:
        self.server = server
        self.at = 0.0

    def start(self) -> None:
        self.at = self.server.cpu()

    def elapsed(self) -> float:
        return self.server.cpu() - self.at


def bench_turns(kinds: list[Server], rounds: int, turns: int, warmup: int) -> dict[str, dict[str, TurnFigures]]:
    """Each client style, in rounds, alternating which server goes first."""
    styles: dict[str, Callable[[Server, Running, str, int, int, Mark], list[float]]] = {
        "http.client": turns_http_client,
        "socket+SSE": turns_raw_sse,
        "httpx+SSE": turns_httpx,
    }
    out: dict[str, dict[str, TurnFigures]] = {style: {k.name: TurnFigures() for k in kinds} for style in styles}
    with ExitStack() as stack:
        running = {k.name: stack.enter_context(k.run()) for k in kinds}
        for round_no in range(rounds):
            order = kinds if round_no % 2 == 0 else kinds[::-1]
            for style, fn in styles.items():
                for kind in order:
                    server = running[kind.name]
                    clock = CpuClock(server)
                    samples = fn(kind, server, kind.new_session(server), turns, warmup, clock.start)
                    figures = out[style][kind.name]
                    figures.cpu_s += clock.elapsed()
                    figures.turns += turns
                    figures.samples += samples
            print(f"    turns: round {round_no + 1}/{rounds} done", flush=True)
    return out


# ---- start-up and memory ------------------------------------------------------------------------------
def bench_startup(kinds: list[Server], runs: int) -> dict[str, dict[str, list[float]]]:
    """Spawn -> healthy. The bridge's bytecode (its own and its libraries') is kept in a cache dir of
    this run, written by a first start ("cached"), or in a new empty one each time ("nothing cached")."""
    out: dict[str, dict[str, list[float]]] = {
        k.name: {"cached": [], "cpu": [], "ready": [], "uncached": []} for k in kinds
    }
    with tempfile.TemporaryDirectory() as cache:
        cached = {"PYTHONPYCACHEPREFIX": cache, "PYTHONDONTWRITEBYTECODE": ""}
        for kind in kinds:  # one start first: bytecode written for the bridge, binary in the page cache
            with kind.run(cached):
                pass
        for run in range(runs):
            for kind in kinds if run % 2 == 0 else kinds[::-1]:
                with kind.run(cached) as server:
                    out[kind.name]["cached"].append(server.started_s * 1000)
                    out[kind.name]["cpu"].append(server.started_cpu_s * 1000)
                    out[kind.name]["ready"].append(server.ready_s * 1000)
                if isinstance(kind, Bridge):
                    with (
                        tempfile.TemporaryDirectory() as empty,
                        kind.run({"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}) as server,
                    ):
                        out[kind.name]["uncached"].append(server.started_s * 1000)
    return out


def floor_rss() -> float:
    """Idle RSS of the one-route FastAPI application (a few requests answered, then a second idle)."""
    with Floor().run() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for _ in range(3):
            conn.request("GET", "/v1/health")
            conn.getresponse().read()
        conn.close()
        time.sleep(1.0)
        return server.rss()


def bench_memory(kinds: list[Server], sessions: int) -> dict[str, tuple[float, float, float]]:
    """RSS with one idle session (one turn done), then per idle session over ``sessions`` more."""
    out = {}
    for kind in kinds:
        with kind.run() as server:
            sid = kind.new_session(server)
            turns_http_client(kind, server, sid, 3)
            time.sleep(1.0)
            idle = server.rss()
            for _ in range(sessions):
                turns_http_client(kind, server, kind.new_session(server), 1)
            time.sleep(1.0)
            loaded = server.rss()
        out[kind.name] = (idle, loaded, (loaded - idle) / sessions)
    return out


# ---- bursts ---------------------------------------------------------------------------------------------
class Count:
    """Counts a marker in a growing buffer, also where it straddles two reads; keeps memory flat."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.total = 0
        self.buffer = b""

    def feed(self, chunk: bytes) -> int:
        data = self.buffer + chunk
        self.total += data.count(self.marker)
        self.buffer = data[-(len(self.marker) - 1) :]
        return self.total


def _post_in_thread(server: Running, request: tuple[str, str, bytes]) -> threading.Thread:
    """The anchor's prompt POST answers only when the turn is over: sent from a thread."""

    def post() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        conn.request(request[0], request[1], request[2], HEADERS)
        conn.getresponse().read()
        conn.close()

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread


def one_burst(kind: Server, server: Running, count: int) -> tuple[int, float, float]:
    """Chunks delivered to one SSE reader, their rate (to the last one delivered) and the server's
    CPU seconds from the prompt to the turn's end."""
    sid = kind.new_session(server)
    with (
        httpx.Client(base_url=server.url, timeout=120) as client,
        client.stream("GET", kind.stream_path(sid), headers={"accept": "text/event-stream"}) as response,
    ):
        chunks = Count(kind.chunk_marker)
        ended = Count(kind.end_marker)
        cpu0 = server.cpu()
        t0 = time.perf_counter()
        poster = _post_in_thread(server, kind.send(sid, f"burst {count}"))
        t_last = t0
        for data in response.iter_raw():
            before = chunks.total
            if chunks.feed(data) > before:
                t_last = time.perf_counter()
            if ended.feed(data):
                break
        poster.join(60)
        cpu = server.cpu() - cpu0
    return chunks.total, chunks.total / (t_last - t0), cpu


def bench_routes(kind: Server, requests: int, rounds: int) -> dict[str, float]:
    """Server CPU per request (us) of GET /v1/health and GET /v1/agents, on one keep-alive
    connection, in alternating rounds."""
    cpu = {"/v1/health": 0.0, "/v1/agents": 0.0}
    with kind.run() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for path in cpu:  # first answers: what is loaded or learned once
            conn.request("GET", path)
            assert conn.getresponse().read() and True
        for round_no in range(rounds):
            for path in cpu if round_no % 2 == 0 else list(cpu)[::-1]:
                start = server.cpu()
                for _ in range(requests):
                    conn.request("GET", path)
                    response = conn.getresponse()
                    response.read()
                    assert response.status == 200, response.status
                cpu[path] += server.cpu() - start
        conn.close()
    return {path: seconds / (requests * rounds) * 1e6 for path, seconds in cpu.items()}


def bench_burst(kinds: list[Server], runs: int, count: int) -> dict[str, list[tuple[int, float, float]]]:
    out: dict[str, list[tuple[int, float, float]]] = {k.name: [] for k in kinds}
    with ExitStack() as stack:
        running = {k.name: stack.enter_context(k.run()) for k in kinds}
        for run in range(runs):
            for kind in kinds if run % 2 == 0 else kinds[::-1]:
                out[kind.name].append(one_burst(kind, running[kind.name], count))
    return out


async def _fanout_reader(kind: Server, url: str, sid: str, ready: list[int], go: asyncio.Event) -> tuple[int, float]:
    async with (
        httpx.AsyncClient(base_url=url, timeout=None) as client,
        client.stream("GET", kind.stream_path(sid), headers={"accept": "text/event-stream"}) as response,
    ):
        ready[0] += 1
        if ready[0] == ready[1]:
            go.set()
        chunks = Count(kind.chunk_marker)
        ended = Count(kind.end_marker)
        async for data in response.aiter_raw():
            chunks.feed(data)
            if ended.feed(data):
                break
        return chunks.total, time.perf_counter()


async def _fanout(kind: Server, server: Running, sid: str, readers: int, count: int) -> tuple[list[int], float]:
    go = asyncio.Event()
    ready = [0, readers]
    tasks = [asyncio.create_task(_fanout_reader(kind, server.url, sid, ready, go)) for _ in range(readers)]
    await asyncio.wait_for(go.wait(), 60)
    await asyncio.sleep(0.2)  # the last reader's subscription reaches the server
    t0 = time.perf_counter()
    poster = _post_in_thread(server, kind.send(sid, f"burst {count}"))
    results = await asyncio.wait_for(asyncio.gather(*tasks), 600)
    poster.join(60)
    return [n for n, _ in results], max(t for _, t in results) - t0


def bench_fanout(kinds: list[Server], runs: int, readers: int, count: int) -> dict[str, list[tuple[list[int], float]]]:
    out: dict[str, list[tuple[list[int], float]]] = {k.name: [] for k in kinds}
    with ExitStack() as stack:
        running = {k.name: stack.enter_context(k.run()) for k in kinds}
        for run in range(runs):
            for kind in kinds if run % 2 == 0 else kinds[::-1]:
                server = running[kind.name]
                out[kind.name].append(asyncio.run(_fanout(kind, server, kind.new_session(server), readers, count)))
    return out


# ---- report ---------------------------------------------------------------------------------------------
class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.missed = 0

    def check(self, met: bool, target: str) -> str:
        """The target column of a row, counting the targets missed."""
        self.missed += not met
        return f"{target} {'OK' if met else 'MISSED'}"

    def add(self, name: str, bridge: str, anchor: str, ratio: str, target: str = "") -> None:
        self.rows.append((name, bridge, anchor, ratio, target))

    def print(self) -> None:
        header = ("figure", "bridge", "sandbox-agent 0.4.2", "ratio", "target")
        widths = [max(len(r[i]) for r in [header, *self.rows]) for i in range(5)]
        for row in [header, tuple("-" * w for w in widths), *self.rows]:
            print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")


def machine_line() -> str:
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    cpu = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} cores ({cpu}); load before the run {load}; "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def _describe(root: Path) -> str:
    """The bridge's source: its commit, and whether it has changes not committed."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "app"], capture_output=True, text=True)
    except OSError:
        return "a source tree without git"
    if head.returncode != 0:
        return "a source tree without git"
    return f"commit {head.stdout.strip()}" + (" with changes" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", default=["turns", "startup", "memory", "burst", "fanout", "routes"])
    parser.add_argument("--rounds", type=int, default=3, help="turn rounds (alternating order)")
    parser.add_argument("--turns", type=int, default=300, help="turns per client style, round and server")
    parser.add_argument("--startup-runs", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=100, help="idle sessions for RSS per session")
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--count", type=int, default=10_000, help="chunks per burst")
    parser.add_argument("--readers", type=int, default=100)
    parser.add_argument("--fanouts", type=int, default=2)
    parser.add_argument("--requests", type=int, default=1000, help="GETs per route and round (routes)")
    parser.add_argument("--bridge-root", type=Path, default=ROOT, help="run the bridge from this source tree")
    parser.add_argument(
        "--against",
        type=Path,
        help="turns only: also the bridge from this source tree, a third server in the same rounds",
    )
    args = parser.parse_args(argv)
    kinds: list[Server] = [Bridge(args.bridge_root.resolve()), Anchor()]
    against = f"; --against from {_describe(args.against)}" if args.against is not None else ""
    print(f"bench.compare: {machine_line()}; bridge from {_describe(args.bridge_root)}{against}", flush=True)
    table = Table()

    if "turns" in args.parts:
        print(f"turns: {args.rounds} rounds x {args.turns} trivial turns per client style and server", flush=True)
        other: list[Server] = []
        if args.against is not None:
            # Another version of the bridge in the same rounds: the fairest comparison of two trees
            # on a machine whose load changes from one run to the next.
            second = Bridge(args.against.resolve())
            second.name = "against"
            other = [second]
        figures = bench_turns([*kinds, *other], args.rounds, args.turns, warmup=20)
        targets = {"http.client": 2.2, "socket+SSE": None, "httpx+SSE": None}
        cpu_targets = {"http.client": 3.0, "socket+SSE": None, "httpx+SSE": None}
        for style, per in figures.items():
            b, a = per["bridge"], per["anchor"]
            ratio = b.p50 / a.p50
            target = targets[style]
            text = "" if target is None else table.check(ratio <= target, f"<= {target}x")
            table.add(
                f"turn round trip p50, {style}",
                f"{b.p50:.2f} ms (p99 {percentile(b.samples, 99):.2f})",
                f"{a.p50:.2f} ms (p99 {percentile(a.samples, 99):.2f})",
                f"{ratio:.2f}x",
                text,
            )
        for style, per in figures.items():
            b, a = per["bridge"], per["anchor"]
            ratio = b.cpu_us / a.cpu_us
            target = cpu_targets[style]
            text = "" if target is None else table.check(ratio <= target, f"<= {target}x")
            table.add(
                f"server CPU per turn, {style}", f"{b.cpu_us:,.0f} us", f"{a.cpu_us:,.0f} us", f"{ratio:.2f}x", text
            )
        for style, per in figures.items() if other else ():
            b, a, o = per["bridge"], per["anchor"], per["against"]
            table.add(
                f"  --against: turn p50 / server CPU, {style}",
                f"{o.p50:.2f} ms / {o.cpu_us:,.0f} us",
                "",
                f"{o.p50 / a.p50:.2f}x / {o.cpu_us / a.cpu_us:.2f}x",
                f"bridge / against: CPU {b.cpu_us / o.cpu_us:.2f}x",
            )

    if "startup" in args.parts:
        print(f"startup: {args.startup_runs} runs each", flush=True)
        starts = bench_startup(kinds, args.startup_runs)
        ours, anchor = statistics.median(starts["bridge"]["cached"]), statistics.median(starts["anchor"]["cached"])
        table.add(
            "cold start to healthy, median (bytecode cached)",
            f"{ours:.0f} ms",
            f"{anchor:.0f} ms",
            f"{ours / anchor:.1f}x",
            table.check(ours <= 150, "<= 150 ms"),
        )
        ours, anchor = statistics.median(starts["bridge"]["cpu"]), statistics.median(starts["anchor"]["cpu"])
        table.add(
            "  its CPU, median (the server's own, at that moment)",
            f"{ours:.0f} ms",
            f"{anchor:.0f} ms",
            f"{ours / anchor:.1f}x" if anchor > 0 else "-",
        )
        ours, anchor = statistics.median(starts["bridge"]["ready"]), statistics.median(starts["anchor"]["ready"])
        table.add(
            "cold start to the whole API (GET /v1/sessions; anchor: healthy)",
            f"{ours:.0f} ms",
            f"{anchor:.0f} ms",
            f"{ours / anchor:.1f}x",
        )
        u = statistics.median(starts["bridge"]["uncached"])
        table.add(
            "cold start, nothing cached (PYTHONPYCACHEPREFIX empty)",
            f"{u:.0f} ms",
            f"{anchor:.0f} ms",
            f"{u / anchor:.1f}x",
        )

    if "memory" in args.parts:
        print(f"memory: idle, then {args.sessions} idle sessions", flush=True)
        floor = floor_rss()
        mem = bench_memory(kinds, args.sessions)
        (bi, bl, bp), (ai, al, ap) = mem["bridge"], mem["anchor"]
        table.add(
            "idle RSS, one idle session",
            f"{bi:.1f} MB",
            f"{ai:.1f} MB",
            f"{bi / ai:.1f}x",
            table.check(bi <= floor + 4, f"<= floor + 4 MB ({floor + 4:.1f})"),
        )
        table.add("  floor: one-route FastAPI app, same uvicorn", f"{floor:.1f} MB", "", "")
        table.add(
            f"RSS per idle session ({args.sessions})",
            f"{bp:.3f} MB",
            f"{ap:.3f} MB",
            f"{bp / ap:.1f}x" if ap > 0 else "-",
            table.check(bp <= 0.15, "<= 0.15 MB"),
        )
        table.add(f"RSS with {args.sessions + 1} idle sessions", f"{bl:.1f} MB", f"{al:.1f} MB", f"{bl / al:.1f}x")

    if "burst" in args.parts:
        print(f"burst: {args.bursts} bursts of {args.count} chunks to one SSE reader, each server", flush=True)
        bursts = bench_burst(kinds, args.bursts, args.count)
        rates = {name: statistics.median(r for _, r, _ in runs) for name, runs in bursts.items()}
        lost = {name: sum(args.count - n for n, _, _ in runs) for name, runs in bursts.items()}
        lossy = {name: sum(n < args.count for n, _, _ in runs) for name, runs in bursts.items()}
        # CPU per event delivered (the anchor's lost chunks cost it little: per chunk sent).
        per_event = {name: sum(c for _, _, c in runs) / (args.count * len(runs)) * 1e6 for name, runs in bursts.items()}
        cpu_ratio = per_event["bridge"] / per_event["anchor"]
        table.add(
            f"{args.count:,}-chunk burst, one SSE reader, server CPU per event",
            f"{per_event['bridge']:.2f} us",
            f"{per_event['anchor']:.2f} us",
            f"{cpu_ratio:.2f}x",
            table.check(lost["bridge"] == 0 and cpu_ratio <= 0.85, "<= 0.85x, 0 lost"),
        )
        ratio = rates["bridge"] / rates["anchor"]
        table.add(
            "  median rate",
            f"{rates['bridge']:,.0f}/s",
            f"{rates['anchor']:,.0f}/s",
            f"{ratio:.2f}x",
        )
        table.add(
            "  bursts with loss / chunks lost",
            f"{lossy['bridge']}/{args.bursts} / {lost['bridge']:,}",
            f"{lossy['anchor']}/{args.bursts} / {lost['anchor']:,}",
            "",
        )

    if "fanout" in args.parts:
        print(f"fanout: {args.fanouts} bursts of {args.count} chunks to {args.readers} SSE readers", flush=True)
        fan = bench_fanout(kinds, args.fanouts, args.readers, args.count)
        rate = {n: statistics.median(sum(c) / s for c, s in runs) for n, runs in fan.items()}
        lost_frac = {
            n: sum(args.count * len(c) - sum(c) for c, _ in runs) / (args.count * len(runs[0][0]) * len(runs))
            for n, runs in fan.items()
        }
        ratio = rate["bridge"] / rate["anchor"]
        good = lost_frac["bridge"] == 0 and ratio >= 10
        table.add(
            f"one burst to {args.readers} SSE readers, delivered chunks/s",
            f"{rate['bridge']:,.0f}/s",
            f"{rate['anchor']:,.0f}/s",
            f"{ratio:.1f}x",
            table.check(good, ">= 10x, 0 lost"),
        )
        table.add(
            "  chunks lost over all readers",
            f"{lost_frac['bridge']:.1%}",
            f"{lost_frac['anchor']:.1%}",
            "",
        )

    if "routes" in args.parts:
        print(f"routes: GET /v1/health and /v1/agents, 2 x {args.requests} each", flush=True)
        routes = bench_routes(kinds[0], args.requests, 2)
        health, agents = routes["/v1/health"], routes["/v1/agents"]
        table.add(
            "server CPU per GET /v1/agents (per GET /v1/health)",
            f"{agents:,.0f} us ({health:,.0f} us)",
            "",
            f"{agents / health:.2f}x",
            table.check(agents <= 3 * health, "<= 3x health"),
        )

    table.print()
    with open("/proc/loadavg") as fh:
        print(f"load after the run: {' '.join(fh.read().split()[:3])}")
    print(f"bench.compare: {'some targets MISSED' if table.missed else 'all targets met'}")
    return 1 if table.missed else 0


if __name__ == "__main__":
    sys.exit(main())
