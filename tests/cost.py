"""What a request costs the server, counted, not timed: the harness of ``tests/unit/test_cost.py``.

A whole server runs in this process as ``acp-rest-bridge server`` runs it (the services, ``Front``,
uvicorn with the bridge's httptools protocol, uvloop) on a thread of its own, with the cost probe
agent (``tests/probes/cost_agent.py``: each answer is one write, so it reaches the bridge whole). A
plain-socket client in the calling thread sends one request and reads its answer to the end; while
the server handles it, on its event loop thread, this counts:

- ``calls``: Python function calls (``sys.setprofile``'s ``call`` events; a coroutine's every
  resumption is one) on every thread of the server (the event loop's, the store's writer and
  readers: the profile is set before they start);
- ``bridge_calls``: those of them of the bridge's own code (``app/``): what no library or Python
  release changes;
- ``c_calls``: calls of functions written in C (``c_call``), likewise;
- ``syscalls``: read- and write-like system calls of the event loop thread (``syscr`` + ``syscw``
  of its ``/proc/self/task/<tid>/io``: socket and pipe reads and writes, the database's ``pwrite``);
- ``statements``: SQL statements the event store's connections ran, on any thread (``PRAGMA``s,
  which the writer's housekeeping runs when idle, left out);
- ``threads``: threads that ran Python code for it: each beyond the event loop's is a hand-off
  (a wake-up, a switch, the interpreter lock passed back and forth), which no count of calls shows.

Each figure is what the request adds to counting nothing, and the smallest of ``REPEAT`` runs:
where work is batched by timing (a writer thread that takes two batches as one when it wakes
late), the cheapest run is the one a count can rely on. Nothing here is a timing.
``.venv/bin/python -m tests.cost`` prints the counts (CONTRIBUTING.md: re-baselining).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

PROBES = Path(__file__).resolve().parent / "probes"
APP = str(Path(__file__).resolve().parent.parent / "app") + "/"
OK_PROMPT = "Reply with exactly the single word OK."
BURST = 100
REPEAT = 3


@dataclass(frozen=True)
class Cost:
    calls: int
    bridge_calls: int
    c_calls: int
    syscalls: int
    statements: int
    threads: int

    def __str__(self) -> str:
        return ", ".join(f"{f.name} {getattr(self, f.name):,}" for f in fields(self))


def _io(tid: int) -> int:
    counts = dict(line.split(": ") for line in Path(f"/proc/self/task/{tid}/io").read_text().splitlines())
    return int(counts["syscr"]) + int(counts["syscw"])


class Client:
    """HTTP/1.1 on one keep-alive socket: a request, and its answer read to the end."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"127.0.0.1:{port}"
        self.buffer = b""

    def _fill(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        self.sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"transfer-encoding") == b"chunked":
            parts = []
            while size := int(self._line(), 16):
                parts.append(self._take(size))
                self._take(2)
            self._take(2)
            return status, b"".join(parts)
        return status, self._take(int(headers.get(b"content-length", b"0")))

    def close(self) -> None:
        self.sock.close()


class CountedServer:
    """The server, in this process; ``measure`` counts what one action of the client costs it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.statements = 0
        self._counting = False
        self._calls = [0, 0, 0]
        self._threads: dict[int, list[int]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.server: Any = None
        self.services: Any = None
        self._idle: Cost | None = None

    def _trace(self, sql: str) -> None:
        if self._counting and not sql.lstrip().upper().startswith("PRAGMA"):
            self.statements += 1

    @contextmanager
    def running(self) -> Iterator[Client]:
        # The same environment wherever it runs: resolving agents looks along PATH and in HOME (how
        # many directories, which adapters and logins are there), and the counts would follow them.
        saved = dict(os.environ)
        home = self.tmp / "home"
        home.mkdir(exist_ok=True)
        os.environ.clear()
        os.environ.update(
            {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
        )
        os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
        try:
            with self._running() as client:
                yield client
        finally:
            os.environ.clear()
            os.environ.update(saved)

    @contextmanager
    def _running(self) -> Iterator[Client]:
        import uvicorn
        import uvloop

        from app import datadir, serving, startup
        from app.main import Services, create_front
        from app.settings import Settings

        connect = sqlite3.connect

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = connect(*args, **kwargs)
            if str(args[0] if args else kwargs.get("database", "")).endswith("events.sqlite3"):
                conn.set_trace_callback(self._trace)
            return conn

        agents = self.tmp / "agents.toml"
        agents.write_text(f"[agents.cost]\ncommand = {json.dumps([sys.executable, str(PROBES / 'cost_agent.py')])}\n")
        settings = Settings(data_dir=self.tmp / "data", agents_file=agents, acp_registry_url="", max_sessions=0)
        sqlite3.connect = traced  # type: ignore[assignment]  # (this process: the test's own)
        threading.setprofile(self._profile)  # the threads the server starts (counting only when asked)
        try:
            services = self.services = Services(settings)
            # The writer's housekeeping comes when the writes pause: not within a count.
            services.store.CHECKPOINT_IDLE = 3600.0  # type: ignore[attr-defined]
            datadir.prepare(settings)
            services.store.open()
        finally:
            sqlite3.connect = connect
        failures: list[str] = []
        sock = startup.listen("127.0.0.1", 0)
        port = sock.getsockname()[1]
        limits = serving.ConnectionLimits(64, 30.0, 30.0, 30.0, 4)
        config = uvicorn.Config(
            create_front(services, failures.append),
            log_level="warning",
            access_log=False,
            ws="none",
            lifespan="on",
            log_config=None,
            http=serving.protocol_class(serving.Connections(limits)),
        )
        self.server = server = uvicorn.Server(config)
        loop = self.loop = uvloop.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(server.serve(sockets=[sock]))

        self.thread = threading.Thread(target=serve, name="cost-server", daemon=True)
        self.thread.start()
        client = None
        try:
            client = self._connect(port)
            yield client
        finally:
            if client is not None:
                client.close()
            server.should_exit = True
            self.thread.join(30)
            loop.close()
            threading.setprofile(None)
            datadir.remove(settings)

    def _connect(self, port: int) -> Client:
        for _ in range(3000):
            if self.server.started:
                break
            if not self.thread or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            threading.Event().wait(0.01)  # (a start-up: nothing to wait on but its flag)
        client = Client(port)
        status, _ = client.request("GET", "/v1/sessions")  # waits for the HTTP application
        assert status == 200, status
        return client

    # ---- counting ---------------------------------------------------------------------------------
    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if not self._counting:
            return
        counts = self._threads.get(threading.get_ident())
        if counts is None:
            counts = self._threads[threading.get_ident()] = [0, 0, 0]  # (one list per thread: no lost count)
        if event == "call":
            counts[0] += 1
            if frame.f_code.co_filename.startswith(APP):
                counts[1] += 1
        elif event == "c_call":
            counts[2] += 1

    async def _begin(self) -> int:
        gc.disable()  # a collection's finalizers are no part of a request
        self._threads = {}
        self.statements = 0
        sys.setprofile(self._profile)
        self._counting = True
        return _io(threading.get_native_id())

    async def _end(self) -> int:
        # What the request left to the loop (a turn's task ending, the connection's next request
        # made ready) runs first: the answer has been read, so nothing waits for I/O any more.
        for _ in range(20):
            await asyncio.sleep(0)
        self._counting = False
        sys.setprofile(None)
        gc.enable()
        self._calls = [sum(c[i] for c in self._threads.values()) for i in range(3)]
        return _io(threading.get_native_id())

    def _run(self, coro: Any) -> int:
        assert self.loop is not None
        result: int = asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)
        return result

    def _counted(self, action: Callable[[], None]) -> Cost:
        """The smallest counts of ``REPEAT`` runs of ``action``, the counting's own included."""
        runs = []
        for _ in range(REPEAT):
            before = self._run(self._begin())
            try:
                action()
            finally:
                after = self._run(self._end())
            calls, bridge_calls, c_calls = self._calls
            threads = sum(1 for counts in self._threads.values() if counts[0])
            runs.append(Cost(calls, bridge_calls, c_calls, after - before, self.statements, threads))
        return Cost(*(min(getattr(run, f.name) for run in runs) for f in fields(Cost)))

    def measure(self, action: Callable[[], None]) -> Cost:
        """What ``action`` costs the server: its counts less those of counting nothing."""
        if self._idle is None:
            self._idle = self._counted(lambda: None)
        cost = self._counted(action)
        return Cost(*(getattr(cost, f.name) - getattr(self._idle, f.name) for f in fields(Cost)))


def measure_all(tmp: Path) -> dict[str, Cost]:
    """The costs the test budgets: a trivial turn, a burst, the agents list (cached and not)."""
    server = CountedServer(tmp)
    with server.running() as client:
        status, _ = client.request("POST", "/v1/sessions/c", {"agent": "cost"})
        assert status == 200, status

        def turn(text: str) -> Callable[[], None]:
            def run() -> None:
                status, body = client.request("POST", "/v1/sessions/c/messages/stream", {"message": text})
                assert status == 200 and b'"turn.ended"' in body, (status, body[-300:])

            return run

        def get(path: str) -> Callable[[], None]:
            def run() -> None:
                status, _ = client.request("GET", path)
                assert status == 200, status

            return run

        for action in (turn(OK_PROMPT), turn(f"burst {BURST}"), get("/v1/agents"), get("/v1/health")):
            action()  # first uses: what is loaded or learned once
            action()
        registry = server.services.registry
        costs = {
            "turn": server.measure(turn(OK_PROMPT)),
            "burst": server.measure(turn(f"burst {BURST}")),
            "health": server.measure(get("/v1/health")),
        }
        registry.RESOLVE_TTL = 3600.0  # every list from the cache of agent resolution
        get("/v1/agents")()
        costs["agents"] = server.measure(get("/v1/agents"))
        registry.RESOLVE_TTL = 0.0  # every list resolves every agent again
        costs["agents, resolved"] = server.measure(get("/v1/agents"))
    return costs


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        costs = measure_all(Path(tmp))
    for name, cost in costs.items():
        print(f"{name:18} {cost}")


if __name__ == "__main__":
    main()
