"""The connection cap of ``app/serving.py``: at the cap a connection whose reader has taken nothing
for a while makes room, else the longest-idle one (once idle for a second); while none is old
enough the new connection waits for one, unread (oldest first), then gets 503, never a reset while
there is room to wait in; what happened is logged in one line. The rules with stand-in connections
and given times, then on a real uvicorn server (asyncio's and uvloop's transports)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest

from app.serving import (
    IDLE_GRACE,
    STUCK_GRACE,
    WAIT_MIN,
    ConnectionLimits,
    Connections,
    GuardedHttpTools,
    connection_cap,
    protocol_class,
)
from tests.support import wait_until_async


class Conn:
    """What ``Connections`` uses of a connection; ``seen`` is when its reader last took something."""

    counted = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self.entered = False
        self.refused = False
        self.seen = 0.0

    def close_idle(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def enter(self) -> None:
        self.entered = True

    def refuse(self) -> None:
        self.refused = True

    def write_progress(self, now: float) -> float:
        return self.seen

    def peer(self) -> str:
        return self.name


def guarded(conn: Conn) -> GuardedHttpTools:
    return conn  # type: ignore[return-value]  # a stand-in with what Connections uses of one


def admit(connections: Connections, conn: Conn, now: float) -> str:
    return connections.admit(guarded(conn), now)


def stuck(connections: Connections, conn: Conn, since: float) -> None:
    """Its answer waits for a reader that has taken nothing since ``since``."""
    conn.seen = since
    connections.busy(guarded(conn))
    connections.writing_stuck(guarded(conn), since)


def cap(limit: int, **limits: Any) -> Connections:
    # The timers a decision sets never run here (nothing awaits): the tests say when to look.
    return Connections(ConnectionLimits(limit, 15, 30, **limits), clock=lambda: 0.0)


async def test_the_longest_idle_connection_makes_room_else_the_new_one_waits(caplog: pytest.LogCaptureFixture) -> None:
    connections = cap(2)
    a, b, c, d = (Conn(n) for n in "abcd")
    assert admit(connections, a, 0.0) == "open" and admit(connections, b, 0.1) == "open"
    connections.busy(guarded(a))  # a request is running on a: never closed to make room
    assert admit(connections, c, 0.5) == "wait"  # b has been idle for less than a second
    connections.pump(1.0)
    assert not c.entered and not b.closed
    connections.pump(0.101 + IDLE_GRACE)  # now b makes room, and c gets in
    assert b.closed and c.entered and not a.closed and connections.open == 2
    connections.release(guarded(b))  # its close, reported later, changes nothing
    assert connections.open == 2 and not connections.waiting
    assert admit(connections, d, 5.0) == "open"  # c, idle since 1.1, is the oldest
    assert c.closed and not a.closed
    with caplog.at_level(logging.WARNING, logger="acp_rest_bridge.connections"):
        connections.log_line()
    assert "1 waited for room at the cap of 2 open connections (at most 0.6 s)" in caplog.text
    assert "2 idle ones closed to make room" in caplog.text
    assert connections.totals["waited"] == 1 and connections.totals["made room"] == 2
    assert connections.totals["refused"] == connections.totals["reset"] == 0


async def test_a_client_that_comes_with_a_flood_waits_for_the_flood_to_be_old_enough() -> None:
    """The cap filled by readers that take nothing, all of them just now (one burst, accepted
    together): a client that comes with them is not refused; it waits, and gets in (first come,
    first in) as soon as the oldest of them has taken nothing for ``STUCK_GRACE``."""
    connections = cap(2)
    flood = [Conn("flood-1"), Conn("flood-2")]
    client, late = Conn("client"), Conn("flood-3")
    for conn in flood:
        assert admit(connections, conn, 0.0) == "open"
    stuck(connections, flood[0], 0.1)
    stuck(connections, flood[1], 0.2)
    assert admit(connections, client, 0.2) == "wait"  # every one of them younger than the grace
    assert admit(connections, late, 0.21) == "wait"
    connections.pump(0.101 + STUCK_GRACE)
    assert flood[0].closed and client.entered and not late.entered and not flood[1].closed
    connections.pump(0.201 + STUCK_GRACE)
    assert flood[1].closed and late.entered and connections.open == 2 and not connections.waiting


async def test_a_reader_that_takes_something_is_not_stuck_for_that_while() -> None:
    """Stuck-ness counts from the last byte its reader took, not from the pause: a client reading a
    long answer slowly goes to the back of the line, one that takes nothing makes room."""
    connections = cap(2)
    slow, dead, new, other = Conn("slow"), Conn("dead"), Conn("new"), Conn("other")
    assert admit(connections, slow, 0.0) == "open" and admit(connections, dead, 0.0) == "open"
    stuck(connections, slow, 0.0)
    stuck(connections, dead, 0.1)
    slow.seen = 0.3  # its reader took some of its answer at 0.3
    assert admit(connections, new, 0.5) == "open"
    assert dead.closed and not slow.closed
    assert list(connections.stuck.values()) == [0.5]  # slow, from when its progress was seen
    assert admit(connections, other, 0.6) == "wait"  # slow has taken nothing for 0.1 s only
    connections.pump(0.501 + STUCK_GRACE)
    assert slow.closed and other.entered


async def test_no_room_in_time_is_a_503_and_beyond_the_waiting_room_a_reset(caplog: pytest.LogCaptureFixture) -> None:
    connections = cap(1, admit_wait=5.0)
    busy = Conn("busy")
    assert admit(connections, busy, 0.0) == "open"
    connections.busy(guarded(busy))  # a long request whose reader reads: never closed for room
    waiting = [Conn(f"w{i}") for i in range(WAIT_MIN)]
    for index, conn in enumerate(waiting):
        assert admit(connections, conn, index / 100) == "wait"
    assert connections.spare == WAIT_MIN
    extra = Conn("extra")
    assert admit(connections, extra, 1.0) == "reset"  # the waiting room is full
    connections.pump(4.99)
    assert not any(conn.refused for conn in waiting)
    connections.pump(5.055)  # the first six have waited 5 s: 503
    assert [conn.refused for conn in waiting] == [True] * 6 + [False] * (WAIT_MIN - 6)
    assert admit(connections, Conn("next"), 5.055) == "reset"  # the refused still count until closed
    connections.release(guarded(waiting[0]))
    assert admit(connections, Conn("next"), 5.055) == "wait"
    connections.release(guarded(busy))  # room: the first one waiting gets in
    connections.pump(5.055)
    assert waiting[6].entered and not waiting[7].entered and not waiting[7].refused
    assert not busy.closed and not any(conn.closed for conn in waiting)
    with caplog.at_level(logging.WARNING, logger="acp_rest_bridge.connections"):
        connections.log_line()
    assert "6 refused at the cap of 1 open connections (503: no room within 5 s)" in caplog.text
    assert f"2 reset at the cap of 1 open connections ({WAIT_MIN} already waiting)" in caplog.text
    assert "1 waited for room" in caplog.text


async def test_a_client_that_gives_up_waiting_leaves_the_line_and_counts_for_nothing() -> None:
    """A waiting connection whose client closes is out of the line (the next moves up, a place in the
    waiting room is free again) and was never one of the open ones; a 503'd one that closes frees
    its place too."""
    connections = Connections(ConnectionLimits(1, 15, 30, admit_wait=2.0), clock=lambda: 0.0)
    connections.spare = 2  # (the least a real cap has is WAIT_MIN)
    busy, first, second, third = Conn("busy"), Conn("first"), Conn("second"), Conn("third")
    assert admit(connections, busy, 0.0) == "open"
    connections.busy(guarded(busy))
    assert admit(connections, first, 0.1) == "wait" and admit(connections, second, 0.2) == "wait"
    assert admit(connections, third, 0.3) == "reset"
    connections.release(guarded(first))  # its client gave up
    assert connections.open == 1 and list(connections.waiting) == [guarded(second)]
    assert admit(connections, third, 1.5) == "wait"
    connections.pump(2.2)  # second has waited 2 s: 503; third not yet
    assert second.refused and not third.refused and connections.refusing == {guarded(second)}
    connections.release(guarded(second))  # the refused client read its 503 and closed
    assert not connections.refusing and connections.open == 1
    connections.idle_again(guarded(busy), 2.3)
    connections.pump(2.3 + IDLE_GRACE)  # busy has been idle a second: room for third (waited 1.8 s)
    assert busy.closed and third.entered and connections.open == 1
    assert connections.totals == {**connections.totals, "waited": 1, "refused": 1, "reset": 1, "made room": 1}


def test_the_default_cap_is_a_share_of_the_open_file_limit() -> None:
    assert connection_cap(100, 1_000_000) == 100
    assert connection_cap(0, 1024) == 512
    assert connection_cap(0, 1_048_576) == 10_000
    assert Connections(ConnectionLimits(10_000, 1, 1)).spare == 2_500


async def test_nothing_to_log_is_no_line(caplog: pytest.LogCaptureFixture) -> None:
    connections = Connections(ConnectionLimits(1, 1, 1))
    with caplog.at_level(logging.WARNING):
        connections.log_line()
    assert caplog.text == ""


async def test_a_connection_whose_reader_takes_nothing_makes_room_too(caplog: pytest.LogCaptureFixture) -> None:
    connections = cap(2, write_timeout=7)
    a, b, c, d = (Conn(n) for n in "abcd")
    assert admit(connections, a, 0.0) == "open" and admit(connections, b, 0.0) == "open"
    connections.busy(guarded(b))
    stuck(connections, a, 0.1)  # its answer waits for a reader that reads nothing
    assert admit(connections, c, 0.1 + STUCK_GRACE / 2) == "wait"
    assert admit(connections, d, 0.2 + STUCK_GRACE) == "wait"  # c came first: a makes room for c
    assert a.closed and c.entered and not d.entered and not b.closed and connections.open == 2
    connections.busy(guarded(c))
    stuck(connections, b, 1.0)
    connections.writing_again(guarded(b))  # its reader took it: not a candidate any more
    connections.pump(5.0)
    assert not d.entered and not b.closed
    connections.note("write")
    with caplog.at_level(logging.WARNING, logger="acp_rest_bridge.connections"):
        connections.log_line()
    assert "1 whose reader took nothing closed to make room at the cap" in caplog.text
    assert "1 closed whose reader took nothing for 7 s" in caplog.text


async def test_a_reader_that_takes_nothing_goes_before_an_idle_client() -> None:
    """An idle kept-alive connection belongs to a client that reads (closing it races with its next
    request): at the cap, one whose reader takes nothing makes room first, however long the other
    has been idle."""
    connections = cap(2)
    idle, dead, new = Conn("idle"), Conn("stuck"), Conn("new")
    assert admit(connections, idle, 0.0) == "open" and admit(connections, dead, 0.0) == "open"
    stuck(connections, dead, 4.0)
    assert admit(connections, new, 5.0) == "open"
    assert dead.closed and not idle.closed


# ---- on a real server ----------------------------------------------------------------------------
LOOPS = ["asyncio", "uvloop"]


def run_in(loop_name: str, test: Callable[[], Awaitable[None]]) -> None:
    """Runs ``test`` on a new event loop of that kind (the server runs uvloop where it is installed)."""
    if loop_name == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed here (it is on Linux)")
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(test(), 30))
    finally:
        loop.close()


@asynccontextmanager
async def served(limits: ConnectionLimits, app: Any) -> Any:
    """uvicorn on 127.0.0.1 with the bridge's protocol; yields (port, its Connections)."""
    import uvicorn

    connections = Connections(limits)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, http=protocol_class(connections), lifespan="off", log_config=None, access_log=False, ws="none"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        assert await wait_until_async(lambda: server.started, 10), "uvicorn did not start"
        yield sock.getsockname()[1], connections
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


@contextmanager
def raw_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()


def closed_by_server(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def ok_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def get(port: int, path: str = "/") -> httpx.Response | str:
    """A client's request on a new connection: its answer, or the transport error it saw."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10)
    except httpx.TransportError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_client_that_comes_when_the_cap_is_full_of_new_connections_is_served(loop_name: str) -> None:
    """The cap filled by connections younger than any grace (they just came, one burst): a client's
    request is not reset; its connection waits, unread, and is served once one of them is old
    enough to close."""

    async def test() -> None:
        async with served(ConnectionLimits(2, 15, 30), ok_app) as (port, connections):
            with raw_connections(port, 2) as socks:
                assert await wait_until_async(lambda: connections.open == 2, 10)
                answer = await asyncio.to_thread(lambda: get(port))
                assert isinstance(answer, httpx.Response) and answer.status_code == 200, answer
                assert connections.totals["waited"] == 1 and connections.totals["made room"] == 1
                assert connections.totals["reset"] == connections.totals["refused"] == 0
                assert closed_by_server(socks[0])  # the oldest of them made room
                assert not closed_by_server(socks[1], 0.1)

    run_in(loop_name, test)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_no_room_in_time_is_answered_503_not_reset(loop_name: str) -> None:
    """Every open connection runs a request (a client that reads): a new one waits ``admit_wait``
    and gets 503 ProblemDetails with ``Connection: close``, its request read and dropped, so the
    client reads the answer whole; the running request is untouched."""

    async def test() -> None:
        release = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["path"] == "/long":
                await release.wait()
            await ok_app(scope, receive, send)

        async with served(ConnectionLimits(1, 15, 30, admit_wait=0.3), app) as (port, connections):
            long = asyncio.create_task(asyncio.to_thread(get, port, "/long"))
            assert await wait_until_async(lambda: connections.open == 1 and not connections.idle, 10)
            answer = await asyncio.to_thread(lambda: get(port))
            assert isinstance(answer, httpx.Response), answer
            assert answer.status_code == 503 and answer.headers["connection"] == "close"
            problem = answer.json()
            assert problem["type"] == "urn:sandbox-agent:error:service_unavailable" and problem["status"] == 503
            assert "ACP_BRIDGE_MAX_CONNECTIONS" in problem["detail"]
            assert connections.totals["refused"] == 1 and connections.totals["reset"] == 0
            assert await wait_until_async(lambda: not connections.refusing, 10)  # closed when the client did
            release.set()
            first = await long
            assert isinstance(first, httpx.Response) and first.status_code == 200, first

    run_in(loop_name, test)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_requests_sent_while_waiting_are_all_answered_in_order(loop_name: str) -> None:
    """A connection that waited at the cap sent its requests meanwhile (a 300 KB body first, then
    several pipelined): once in, every one is answered, in order, as on any connection."""

    async def path_app(scope: Any, receive: Any, send: Any) -> None:
        size, more = 0, True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        body = json.dumps(f"{scope['path']} {size}").encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    def pipelined(port: int) -> bytes:
        upload = b"x" * 300_000
        requests = b"POST /0 HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s" % (len(upload), upload)
        requests += b"".join(b"GET /%d HTTP/1.1\r\nHost: a\r\n\r\n" % index for index in range(1, 10))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(requests)
            got = b""
            while got.count(b"HTTP/1.1 200") < 10 or not got.endswith(b'"/9 0"'):
                chunk = sock.recv(65536)
                assert chunk, got
                got += chunk
        return got

    async def test() -> None:
        async with served(ConnectionLimits(1, 15, 30), path_app) as (port, connections):
            with raw_connections(port, 1):
                assert await wait_until_async(lambda: connections.open == 1, 10)
                got = await asyncio.to_thread(lambda: pipelined(port))
        answers = [part.split(b'"')[1] for part in got.split(b"\r\n\r\n")[1:]]
        assert answers == [b"/0 300000"] + [b"/%d 0" % i for i in range(1, 10)]
        assert connections.totals["waited"] == 1 and connections.totals["held"] == 0

    run_in(loop_name, test)
