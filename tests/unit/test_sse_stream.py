"""The SSE response's timers in one process: the keep-alive comment after silence, a reader that
accepts nothing dropped at the send timeout (its connection aborted), a stuck write ended at once
when the server stops, a turn's stream ended with its last frame, a store that cannot be read
waited for (tests/unit/test_postgres_store.py: a real database that goes away)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from app.api import sse
from app.api.middleware import ABORT_EXTENSION
from app.api.sse import KEEPALIVE, EventStream
from app.errors import StorageUnavailable
from app.events.log import SessionEventLog, StoredEvent
from app.events.model import TURN_ENDED, TURN_STARTED, EventDraft
from app.events.store import MemoryEventStore

Message = MutableMapping[str, Any]


class Client:
    """The server side of one connection: what was written, and a reader that may stop reading."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.stalled = False
        self.aborted = asyncio.Event()
        self.wrote = asyncio.Event()
        self.stuck = asyncio.Event()  # a write is under way and will never finish
        self.left = asyncio.Event()
        self.scope: dict[str, Any] = {
            "type": "http",
            "client": ("127.0.0.1", 5000),
            "extensions": {ABORT_EXTENSION: self.aborted.set},
        }

    async def send(self, message: Message) -> None:
        if self.stalled and message["type"] == "http.response.body":
            self.stuck.set()
            await asyncio.Event().wait()  # a reader that takes nothing more
        self.sent.append(message)
        self.wrote.set()

    async def receive(self) -> Message:
        await self.left.wait()
        return {"type": "http.disconnect"}

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]

    async def until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Waits until what was written satisfies ``condition``."""
        async with asyncio.timeout(timeout):
            while not condition():
                self.wrote.clear()
                await self.wrote.wait()


def new_log() -> SessionEventLog:
    return SessionEventLog("s", MemoryEventStore())


async def test_a_silent_stream_sends_keep_alive_comments_and_ends_when_the_client_leaves() -> None:
    client = Client()
    stream = EventStream(new_log(), 0, False, stop_at_terminal=False, keepalive=0.05, send_timeout=1.0)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    await client.until(lambda: client.bodies().count(KEEPALIVE) >= 2)
    client.left.set()
    async with asyncio.timeout(5):
        await task
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert not client.aborted.is_set()


async def test_a_reader_that_accepts_nothing_is_dropped_at_the_send_timeout_and_aborted() -> None:
    client = Client()
    log = new_log()
    stream = EventStream(log, 0, False, stop_at_terminal=False, keepalive=10.0, send_timeout=0.2)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    await client.until(lambda: bool(client.sent))  # the response's start
    client.stalled = True
    started = asyncio.get_running_loop().time()
    log.append(EventDraft(TURN_STARTED, {"turn_id": "t1"}))
    async with asyncio.timeout(5):
        await task
    assert client.aborted.is_set()
    assert 0.15 < asyncio.get_running_loop().time() - started < 2
    assert log.subscriber_count == 0


async def test_a_stuck_write_ends_at_once_when_the_server_stops() -> None:
    client = Client()
    log = new_log()
    stream = EventStream(log, 0, False, stop_at_terminal=False, keepalive=10.0, send_timeout=None)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    await client.until(lambda: bool(client.sent))
    client.stalled = True
    log.append(EventDraft(TURN_STARTED, {"turn_id": "t1"}))
    await client.stuck.wait()
    stream.stop()
    stream.stop()  # the process's watcher says it again while the stream ends
    async with asyncio.timeout(5):
        await task
    assert client.aborted.is_set()


async def test_a_stopped_idle_stream_ends_with_a_complete_body() -> None:
    client = Client()
    stream = EventStream(new_log(), 0, False, stop_at_terminal=False, keepalive=10.0, send_timeout=1.0)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    await client.until(lambda: bool(client.sent))
    stream.stop()
    async with asyncio.timeout(5):
        await task
    assert client.sent[-1]["more_body"] is False
    assert not client.aborted.is_set()


async def test_a_turn_stream_ends_with_its_last_frame_in_one_write() -> None:
    client = Client()
    log = new_log()
    log.append(EventDraft(TURN_ENDED, {"turn_id": "t0"}))  # the end of an earlier turn: not this stream's
    stream = EventStream(log, 0, False, stop_at_terminal=True, turn_id="t1", keepalive=10.0, send_timeout=1.0)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    log.append(EventDraft(TURN_STARTED, {"turn_id": "t1"}))
    log.append(EventDraft(TURN_ENDED, {"turn_id": "t1"}))
    async with asyncio.timeout(5):
        await task
    last = client.sent[-1]
    assert last["more_body"] is False
    assert b'"turn.started"' in b"".join(client.bodies()) and b'"turn.ended"' in last["body"]
    assert b'"t0"' not in b"".join(client.bodies())


class UnreadableStore(MemoryEventStore):
    """A store whose reads fail while ``down`` (a fleet's database that went away)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.failed = 0

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        if self.down:
            self.failed += 1
            raise StorageUnavailable("database gone")
        return await super().read_async(session_id, after, limit, before)


def unreadable_log() -> tuple[SessionEventLog, UnreadableStore]:
    """A log of two events that only its store holds, and that store, down."""
    store = UnreadableStore()
    log = SessionEventLog("s", store)
    log.append(EventDraft(TURN_STARTED, {"turn_id": "t1"}))
    log.append(EventDraft(TURN_ENDED, {"turn_id": "t1"}))
    log.finish()  # nothing in memory: reads go to the store
    store.down = True
    return log, store


async def test_a_stream_whose_store_cannot_be_read_waits_then_goes_on_where_it_was() -> None:
    log, store = unreadable_log()
    client = Client()
    stream = EventStream(log, 0, False, stop_at_terminal=False, keepalive=0.05, send_timeout=1.0)
    task = asyncio.create_task(stream(client.scope, client.receive, client.send))
    await client.until(lambda: client.bodies().count(KEEPALIVE) >= 2)  # waiting, and says so
    assert store.failed >= 1 and not task.done()
    store.down = False
    await client.until(lambda: b"id: 2\n" in b"".join(client.bodies()))
    frames = b"".join(client.bodies())
    assert frames.count(b"id: 1\n") == 1 and frames.index(b"id: 1\n") < frames.index(b"id: 2\n")
    client.left.set()
    async with asyncio.timeout(5):
        await task
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_a_stream_whose_store_stays_unreadable_ends_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "STORAGE_WAIT", 0.3)
    log, _ = unreadable_log()
    client = Client()
    stream = EventStream(log, 0, False, stop_at_terminal=False, keepalive=10.0, send_timeout=1.0)
    async with asyncio.timeout(10):
        await stream(client.scope, client.receive, client.send)
    # A complete response (not a cut one): the client resumes after its last event id.
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert not client.aborted.is_set() and log.subscriber_count == 0
