"""The connection cap of ``app/serving.py``: at the cap a connection whose reader takes nothing makes
room, else the longest-idle one (once idle for a second), else the new one is refused; what happened
is logged in one line."""

from __future__ import annotations

import logging

import pytest

from app.serving import IDLE_GRACE, STUCK_GRACE, ConnectionLimits, Connections, GuardedHttpTools, connection_cap


class Conn:
    counted = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close_idle(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def guarded(conn: Conn) -> GuardedHttpTools:
    return conn  # type: ignore[return-value]  # a stand-in with what Connections uses of one


def admit(connections: Connections, conn: Conn, now: float) -> bool:
    return connections.admit(guarded(conn), now)


async def test_the_longest_idle_connection_makes_room_else_the_new_one_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    connections = Connections(ConnectionLimits(max_connections=2, header_timeout=15, body_timeout=30))
    a, b, c, d, e = (Conn(n) for n in "abcde")
    assert admit(connections, a, 0.0) and admit(connections, b, 0.1)
    connections.busy(guarded(a))  # a request is running on a: never closed to make room
    assert not admit(connections, c, 0.5)  # b has been idle for less than a second
    assert admit(connections, d, 0.1 + IDLE_GRACE)  # now b makes room
    assert b.closed and not a.closed and connections.open == 2
    connections.release(guarded(b))  # its close, reported later, changes nothing
    assert connections.open == 2
    connections.idle_again(guarded(a), 5.0)
    assert admit(connections, e, 5.0)  # d, idle since 1.1, is the oldest
    assert d.closed and not a.closed
    with caplog.at_level(logging.WARNING, logger="acp_rest_bridge.connections"):
        connections.log_line()
    assert "1 refused at the cap of 2 open connections" in caplog.text
    assert "2 idle ones closed to make room" in caplog.text
    assert connections.totals["refused"] == 1 and connections.totals["made room"] == 2


def test_the_default_cap_is_a_share_of_the_open_file_limit() -> None:
    assert connection_cap(100, 1_000_000) == 100
    assert connection_cap(0, 1024) == 512
    assert connection_cap(0, 1_048_576) == 10_000


async def test_nothing_to_log_is_no_line(caplog: pytest.LogCaptureFixture) -> None:
    connections = Connections(ConnectionLimits(1, 1, 1))
    with caplog.at_level(logging.WARNING):
        connections.log_line()
    assert caplog.text == ""


async def test_a_connection_whose_reader_takes_nothing_makes_room_too(caplog: pytest.LogCaptureFixture) -> None:
    connections = Connections(ConnectionLimits(max_connections=2, header_timeout=15, body_timeout=30, write_timeout=7))
    a, b, c, d = (Conn(n) for n in "abcd")
    assert admit(connections, a, 0.0) and admit(connections, b, 0.0)
    connections.busy(guarded(a))
    connections.busy(guarded(b))
    connections.writing_stuck(guarded(a), 0.1)  # its answer waits for a reader that reads nothing
    assert not admit(connections, c, 0.1 + STUCK_GRACE / 2)
    assert admit(connections, d, 0.2 + STUCK_GRACE)  # stuck long enough: closed, its data dropped
    assert a.closed and not b.closed and connections.open == 2
    connections.busy(guarded(d))
    connections.writing_stuck(guarded(b), 1.0)
    connections.writing_again(guarded(b))  # its reader took it: not a candidate any more
    assert not admit(connections, c, 5.0)
    connections.note("write")
    with caplog.at_level(logging.WARNING, logger="acp_rest_bridge.connections"):
        connections.log_line()
    assert "1 whose reader took nothing closed to make room at the cap" in caplog.text
    assert "1 closed whose reader took nothing for 7 s" in caplog.text


async def test_a_reader_that_takes_nothing_goes_before_an_idle_client() -> None:
    """An idle kept-alive connection belongs to a client that reads (closing it races with its next
    request): at the cap, one whose reader takes nothing makes room first, however long the other
    has been idle."""
    connections = Connections(ConnectionLimits(max_connections=2, header_timeout=15, body_timeout=30))
    idle, stuck, new = Conn("idle"), Conn("stuck"), Conn("new")
    assert admit(connections, idle, 0.0) and admit(connections, stuck, 0.0)
    connections.busy(guarded(stuck))
    connections.writing_stuck(guarded(stuck), 4.0)
    assert admit(connections, new, 5.0)
    assert stuck.closed and not idle.closed
