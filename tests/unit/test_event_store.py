"""The event log over its stores: durable SQLite store, bounded tail, cursor readers."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.events.log import SessionEventLog, StoredEvent
from app.events.model import ITEM_DELTA, EventDraft
from app.events.postgres import DatabaseUnavailable, PostgresBackend
from app.events.sqlite import SqliteBackend
from app.events.store import EventStore, MemoryEventStore, StoreError
from app.events.writer import BatchWriter
from tests.support import wait_until_async


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a store keeps its events: a data dir (SQLite) or a fresh database's URL (PostgreSQL,
    a real server the tests start)."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("database_url")
        return url
    return tmp_path


Store = BatchWriter[Any]  # over either backend


def new_store(where: Path | str, **options: Any) -> Store:
    if isinstance(where, str):
        return BatchWriter(PostgresBackend(where), **options)
    return BatchWriter(SqliteBackend(where), **options)


@pytest.fixture
def store(where: Path | str) -> Iterator[Store]:
    s = new_store(where)
    s.open()
    yield s
    s.close()


def draft(index: int, raw: Any = None) -> EventDraft:
    return EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": f"d{index}"}, raw=raw)


def fill(log: SessionEventLog, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        log.append(draft(index))


def seqs(events: list[StoredEvent]) -> list[int]:
    return [e.sequence for e in events]


def reopen(path: Path | str) -> Store:
    s = new_store(path)
    s.open()
    return s


# ---- the store ------------------------------------------------------------------------------
def test_events_are_stored_once_with_their_sequence_and_survive_a_reopen(where: Path | str) -> None:
    store = reopen(where)
    log = SessionEventLog("s1", store)
    log.native_session_id = "native-1"
    fill(log, 50)
    log.append(draft(50, raw={"jsonrpc": "2.0", "method": "session/update", "params": {"x": "é\n"}}))
    assert store.sync(10)
    before = [(e.sequence, e.type, e.json, e.raw_json) for e in log.read_after(0, None)]
    store.save_session("s1", {"info": {"sessionId": "s1"}})
    store.close()  # no explicit sync: close commits what is queued

    if isinstance(where, Path):
        db = sqlite3.connect(where / SqliteBackend.FILENAME)
        assert db.execute("SELECT count(*), count(DISTINCT sequence) FROM events").fetchone() == (51, 51)
        db.close()
    else:
        with psycopg.connect(where) as pg:
            assert pg.execute("SELECT count(*), count(DISTINCT sequence) FROM events").fetchone() == (51, 51)

    again = reopen(where)
    try:
        assert again.load_sessions() == [{"info": {"sessionId": "s1"}}]
        restored = SessionEventLog("s1", again)
        assert (restored.count, restored.last_sequence) == (51, 51)
        assert restored.updated_ns == log.updated_ns
        after = [(e.sequence, e.type, e.json, e.raw_json) for e in restored.read_after(0, None)]
        assert after == before
        assert json.loads(str(after[-1][3]))["params"]["x"] == "é\n"
        # A later append continues the sequence.
        later = restored.append(draft(51))
        assert later is not None and later.sequence == 52
    finally:
        again.close()


def test_reads_never_see_events_the_writer_has_not_committed_yet(store: Store) -> None:
    store.COALESCE = 5.0  # hold the writer back (close() ends the wait)
    log = SessionEventLog("s1", store)
    fill(log, 100)
    assert store.flushed_sequence("s1") < 100
    visible = log.visible_sequence
    assert seqs(log.read_after(0, None)) == list(range(1, visible + 1))
    assert log.count == visible
    store.COALESCE = 0
    assert store.sync(10)
    assert store.flushed_sequence("s1") == 100
    assert seqs(log.read_after(0, None)) == list(range(1, 101))
    assert seqs(log.read_after(90, 5)) == list(range(91, 96))
    assert log.count == 100


def test_a_large_event_is_committed_after_the_events_before_it(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[list[int]] = []
    original = store.backend.insert

    def recording(events: list[StoredEvent]) -> dict[str, int]:
        batches.append([e.sequence for e in events])
        marks: dict[str, int] = original(events)
        return marks

    monkeypatch.setattr(store.backend, "insert", recording)
    store.COALESCE = 0.5  # the writer waits: everything below is queued when it takes its batch
    log = SessionEventLog("s1", store)
    fill(log, 10)
    log.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": "x" * 300_000}))
    fill(log, 5, 11)
    assert store.sync(10)
    # The stream before it is not held back by the megabytes it writes; nothing is out of order.
    assert batches[0] == list(range(1, 11))
    assert batches[1][0] == 11
    assert [n for batch in batches for n in batch] == list(range(1, 17))
    assert seqs(store.read("s1", 0, None)) == list(range(1, 17))
    assert log.count == 16


def test_closing_a_store_whose_writer_waits_is_quick(where: Path | str) -> None:
    store = reopen(where)
    store.COALESCE = 30.0
    log = SessionEventLog("s1", store)
    fill(log, 10)
    store.save_session("s1", {"info": {"sessionId": "s1"}})
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 2
    again = reopen(where)
    try:
        assert again.stats("s1").last_sequence == 10
    finally:
        again.close()


def test_the_tail_stays_bounded_and_older_events_come_from_the_store(store: Store) -> None:
    log = SessionEventLog("s1", store, tail_size=100)
    for chunk in range(20):
        fill(log, 500, chunk * 500)
        store.sync(10)
    fill(log, 100, 10_000)  # triggers trimming now that everything before is committed
    assert log.tail_length <= 100 + 64 + 100
    store.sync(10)  # events are shown once committed: the last hundred too
    assert seqs(log.read_after(0, None)) == list(range(1, 10_101))
    assert seqs(log.read_after(5000, 3)) == [5001, 5002, 5003]
    assert seqs(log.read_after(10_050, None)) == list(range(10_051, 10_101))


def test_the_tail_never_drops_an_uncommitted_event(store: Store) -> None:
    store.COALESCE = 0.5
    log = SessionEventLog("s1", store, tail_size=10, tail_bytes=1000)
    fill(log, 1000)
    assert log.tail_length >= 1000 - store.flushed_sequence("s1")
    store.COALESCE = 0
    assert store.sync(10)
    assert seqs(log.read_after(0, None)) == list(range(1, 1001))


def test_the_tail_is_bounded_by_bytes_too(store: Store) -> None:
    log = SessionEventLog("s1", store, tail_size=100_000, tail_bytes=64 * 1024)
    for chunk in range(10):
        fill(log, 500, chunk * 500)
        assert store.sync(10)
    fill(log, 10, 5000)
    assert sum(e.size for e in log._tail) <= 64 * 1024 + 10 * 2000
    assert store.sync(10)
    assert seqs(log.read_after(0, None)) == list(range(1, 5011))


def test_a_finished_log_keeps_nothing_the_store_has(store: Store) -> None:
    log = SessionEventLog("s1", store)
    fill(log, 2000)
    assert store.sync(10)
    log.finish()
    assert log.tail_length == 0
    assert seqs(log.read_after(0, None)) == list(range(1, 2001))
    assert log.count == 2000


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    with pytest.raises(StoreError, match="in use by another"):
        BatchWriter(SqliteBackend(tmp_path)).open()
    store.close()


async def test_a_deleted_session_stays_deleted_when_its_batch_is_tried_again(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention deletes a session while events of it are queued, in a batch the database refuses once
    (after the delete ran): the batch tried again writes the other session's events and none of the
    deleted one's, and records nothing as failed."""
    old, kept = SessionEventLog("old", store), SessionEventLog("kept", store)
    fill(old, 5)
    store.save_session("old", {"info": {"sessionId": "old"}})
    assert store.sync(10)
    original = store.backend.delete_session
    refused: list[str] = []

    def deleting_then_failing(session_id: str) -> None:
        original(session_id)
        if not refused:
            refused.append(session_id)
            raise (DatabaseUnavailable if isinstance(store.backend, PostgresBackend) else sqlite3.OperationalError)(
                "disk I/O error"
            )

    monkeypatch.setattr(store.backend, "delete_session", deleting_then_failing)
    store.COALESCE = 0.2  # one batch: old's events, its delete, kept's events
    with caplog.at_level(logging.ERROR, logger="acp_rest_bridge.events"):
        fill(old, 3, 5)
        store.delete_session("old")
        fill(kept, 10)
        assert store.sync(10) and refused == ["old"]
    assert store.read("old", 0, None) == [] and store.load_sessions() == []
    assert seqs(store.read("kept", 0, None)) == list(range(1, 11))
    assert not [r for r in caplog.records if "could not be stored" in r.getMessage()]


def test_a_session_whose_create_did_not_complete_is_forgotten(
    where: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (In a shared database only an old one: another bridge may be creating it right now.)
    monkeypatch.setattr(PostgresBackend, "STALE_CREATE", "0 seconds")
    store = reopen(where)
    SessionEventLog("half", store).append(draft(0))  # events, but no session record
    store.save_session("whole", {"info": {"sessionId": "whole"}})
    store.close()
    again = reopen(where)
    try:
        assert again.load_sessions() == [{"info": {"sessionId": "whole"}}]
        assert SessionEventLog("half", again).last_sequence == 0
    finally:
        again.close()


@pytest.mark.parametrize("kind", ["memory", "durable"])
async def test_page_follows_the_legacy_offset_and_limit_rules(kind: str, where: Path | str) -> None:
    store: EventStore = MemoryEventStore() if kind == "memory" else new_store(where)
    store.open()
    try:
        log = SessionEventLog("s1", store, tail_size=8)
        fill(log, 30)
        if isinstance(store, BatchWriter):
            store.sync(10)
        fill(log, 20, 30)  # trims the tail: the first pages come from the store
        if isinstance(store, BatchWriter):
            store.sync(10)
        assert seqs((await log.page(0, None))[0]) == list(range(1, 51))
        assert (await log.page(0, None))[1] is False
        events, more = await log.page(10, 5)
        assert (seqs(events), more) == ([11, 12, 13, 14, 15], True)
        assert await log.page(45, 5) == (log.read_after(45, 5), False)
        assert await log.page(0, 0) == ([], True)
        assert await log.page(50, 0) == ([], False)
        assert await log.page(99, None) == ([], False)
    finally:
        store.close()


async def test_a_batch_costs_one_transaction_and_one_notice(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path, counted: events of a known session queued together are one transaction of as few
    statements as the database allows (SQLite: one INSERT; PostgreSQL: one COPY and its notification)
    and one hand-off back to the event loop, which tells the log."""
    store.CHECKPOINT_IDLE = 60.0  # no idle-time housekeeping within the count
    log = SessionEventLog("s1", store)
    fill(log, 1)
    await wait_for(lambda: log.count == 1)  # the session's row is written
    statements: list[str] = []
    backend = store.backend
    if isinstance(backend, SqliteBackend):
        backend.connection.set_trace_callback(lambda sql: statements.append(sql.split(None, 1)[0]))
    else:
        conn = backend.connection
        execute, copy = conn.execute, conn.copy

        def counted_execute(sql: str, params: Any = None) -> Any:
            statements.append(sql.split(None, 1)[0])
            return execute(sql, params)

        def counted_copy(sql: str, rows: list[tuple[Any, ...]]) -> None:
            statements.append("COPY")
            copy(sql, rows)

        monkeypatch.setattr(conn, "execute", counted_execute)
        monkeypatch.setattr(conn, "copy", counted_copy)
    loop = asyncio.get_running_loop()
    hand_offs: list[object] = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted_call(*args: Any) -> asyncio.Handle:
        hand_offs.append(args)
        return call_soon_threadsafe(*args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted_call)
    store.COALESCE = 0.2  # the writer takes all fifty at once
    fill(log, 50, 1)
    await wait_for(lambda: log.count == 51)
    assert statements == (["INSERT"] if isinstance(backend, SqliteBackend) else ["BEGIN", "COPY", "SELECT", "COMMIT"])
    assert len(hand_offs) == 1


async def test_a_small_batch_is_committed_on_the_event_loop_while_the_writer_thread_is_idle(tmp_path: Path) -> None:
    """A turn's few events: committed at the end of the loop's pass, on the loop, by one prepared
    statement, and shown right after, with no hand-off to the writer thread and back."""
    store = new_store(tmp_path)
    store.CHECKPOINT_IDLE = 60.0  # no housekeeping of the writer thread within the test
    store.open()
    try:
        log = SessionEventLog("s1", store)
        fill(log, 1)
        assert await log.settled(5)  # the session's row: a transaction of the writer thread
        threads: list[str] = []
        backend = store.backend
        write = backend.write

        def recording(events: list[StoredEvent]) -> dict[str, int]:
            threads.append(threading.current_thread().name)
            marks: dict[str, int] = write(events)
            return marks

        backend.write = recording
        for turn in range(3):
            fill(log, 3, 1 + turn * 3)
            assert log.visible_sequence == 1 + turn * 3  # not before the commit
            assert await log.settled(5)
        assert threads == ["MainThread"] * 3 and store.inline_commits == 3
        assert seqs(store.read("s1", 0, None)) == list(range(1, 11))
    finally:
        store.close()


async def test_a_batch_waits_behind_what_the_writer_thread_has_not_committed(tmp_path: Path) -> None:
    """While the writer thread writes (or holds a batch it took), the loop's next batch goes to it
    too, after it: the order holds."""
    store = new_store(tmp_path)
    store.open()
    try:
        log = SessionEventLog("s1", store)
        fill(log, 1)
        assert await log.settled(5)
        release = threading.Event()
        entered = threading.Event()
        backend = store.backend
        write = backend.write

        def slow(events: list[StoredEvent]) -> dict[str, int]:
            if threading.current_thread().name == "event-writer":
                entered.set()
                release.wait(10)
            marks: dict[str, int] = write(events)
            return marks

        backend.write = slow
        fill(log, 40, 1)  # more than a loop commits itself: the writer thread's
        await asyncio.sleep(0)
        assert await asyncio.to_thread(entered.wait, 10)
        inline = store.inline_commits
        fill(log, 2, 41)  # small, but the writer thread has not committed what it took
        await asyncio.sleep(0)
        assert store.inline_commits == inline and store.flushed_sequence("s1") == 1
        release.set()
        assert await log.settled(5)
        assert seqs(store.read("s1", 0, None)) == list(range(1, 44))
    finally:
        store.close()


async def test_settled_waits_until_what_was_appended_is_committed(store: Store) -> None:
    store.COALESCE = 0.2
    log = SessionEventLog("s1", store)
    fill(log, 10)
    assert log.count < 10
    assert await log.settled(5)
    assert log.count == 10 and store.flushed_sequence("s1") == 10
    store.COALESCE = 5.0
    log.append(draft(10))
    assert await log.settled(0.05) is False  # bounded: the request answers anyway


async def test_a_page_has_what_this_bridge_recorded_before_it_once_committed(store: Store) -> None:
    """Another bridge, woken by the commit itself, may show an event to a client before this
    bridge's writer hears that it committed: a page asked for then still has it."""
    store.COALESCE = 0.2  # the writer holds the batch a while
    log = SessionEventLog("s1", store)
    fill(log, 5)
    assert log.visible_sequence < 5
    events, more = await log.page(0, None)
    assert seqs(events) == [1, 2, 3, 4, 5] and not more


# ---- the writer never dies --------------------------------------------------------------------
async def wait_for(predicate: Callable[[], object], timeout: float = 10) -> None:
    """Until the writer's notices, delivered on this loop, make ``predicate`` true."""
    assert await wait_until_async(predicate, timeout), "timed out"


async def test_text_sqlite_cannot_encode_is_cleaned_and_later_events_are_stored(where: Path | str) -> None:
    store = reopen(where)
    bad = SessionEventLog("bad", store)
    good = SessionEventLog("good", store)
    bad.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": "a\ud800b"}))
    bad.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": "\ud83d\ude00"}))
    fill(good, 100)
    fill(bad, 10, 2)
    store.save_session("bad", {"info": {"sessionId": "bad"}})
    store.save_session("good", {"info": {"sessionId": "good"}})
    assert store.sync(10)
    await wait_for(lambda: bad.count == 12 and good.count == 100)
    deltas = [json.loads(e.json)["data"]["delta"] for e in bad.read_after(0, 2)]
    assert deltas == ["a\ufffdb", "\U0001f600"]
    assert store.write_error is None
    store.close()
    again = reopen(where)
    try:
        assert (again.stats("bad").last_sequence, again.stats("good").last_sequence) == (12, 100)
        assert [json.loads(e.json)["data"]["delta"] for e in again.read("bad", 0, 2)] == deltas
    finally:
        again.close()


async def test_a_failure_escaping_the_writer_restarts_it_and_loses_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = store.backend.checkpoint
    failed: list[bool] = []

    def broken() -> None:
        if not failed:
            failed.append(True)
            raise RuntimeError("checkpoint exploded")
        original()

    monkeypatch.setattr(store.backend, "checkpoint", broken)
    store.CHECKPOINT_MAX = 1  # checkpoint after every transaction
    log = SessionEventLog("s1", store)
    for chunk in range(5):
        fill(log, 100, chunk * 100)
        await asyncio.sleep(0.01)
    await wait_for(lambda: log.count == 500)
    assert failed
    assert store.writing
    assert seqs(log.read_after(0, None)) == list(range(1, 501))


def disk_full(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The store's inserts fail as on a full disk while the returned switch is True."""
    original = store.backend.insert
    full = [True]

    def refusing(events: list[StoredEvent]) -> dict[str, int]:
        if full[0]:
            if isinstance(store.backend, PostgresBackend):
                raise DatabaseUnavailable("database or disk is full")
            raise sqlite3.OperationalError("database or disk is full")
        marks: dict[str, int] = original(events)
        return marks

    monkeypatch.setattr(store.backend, "insert", refusing)
    return full


async def test_a_disk_that_refuses_writes_is_loud_and_recovers(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    full = disk_full(store, monkeypatch)
    running = SessionEventLog("running", store)
    ended = SessionEventLog("ended", store)
    ended.finish()
    sub = running.subscribe(0)
    fill(running, 50)
    await wait_for(lambda: store.unavailable is not None)
    assert "disk is full" in (store.unavailable or "")
    got: list[StoredEvent] = []
    async with asyncio.timeout(5):
        while len(got) < 51:
            got.extend(await sub.next_batch())
    # Shown from memory, with one error event saying why.
    errors = [json.loads(e.json)["data"] for e in got if e.type == "error"]
    assert [e["code"] for e in errors] == ["storage_unavailable"]
    assert "disk is full" in errors[0]["message"]
    assert ended.count == 0 and ended.last_sequence == 0
    fill(running, 50, 50)
    full[0] = False
    await wait_for(lambda: store.unavailable is None)
    assert store.sync(10)
    stored = store.read("running", 0, None)
    assert seqs(stored) == list(range(1, 102))
    assert running.count == 101


async def test_a_store_closed_while_the_disk_refuses_says_what_it_could_not_save(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    disk_full(store, monkeypatch)
    log = SessionEventLog("s1", store)
    fill(log, 20)
    await wait_for(lambda: store.unavailable is not None)
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="acp_rest_bridge.events"):
        await asyncio.to_thread(store.close)
    assert time.monotonic() - started < 5
    lost = [r.getMessage() for r in caplog.records if "events not saved" in r.getMessage()]
    assert len(lost) == 1 and "database or disk is full" in lost[0], lost
    assert int(lost[0].split("; ")[-1].split()[0]) >= 20  # (and the log's notice of the outage)


async def test_the_backlog_is_bounded_and_refused_events_leave_no_gap(
    where: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_store(where, backlog_bytes=20_000)
    store.open()
    try:
        full = disk_full(store, monkeypatch)
        log = SessionEventLog("s1", store)
        fill(log, 1000)
        assert log.last_sequence < 1000
        kept = log.last_sequence
        await wait_for(lambda: store.unavailable is not None)
        full[0] = False
        # Once writing again, the log says how many events it could not keep.
        await wait_for(lambda: log.count == log.last_sequence > kept)
        assert store.sync(10)
        stored = store.read("s1", 0, None)
        assert seqs(stored) == list(range(1, log.last_sequence + 1))
        notes = [json.loads(e.json)["data"] for e in stored if e.type == "error"]
        assert notes[-1]["details"]["dropped"] >= 1000 - kept  # (plus the notice of the outage itself)
    finally:
        store.close()


# ---- readers -------------------------------------------------------------------------------
async def test_a_reader_gets_backlog_then_live_without_gap_or_duplicate(store: Store) -> None:
    log = SessionEventLog("s1", store, tail_size=64)
    fill(log, 300)
    store.sync(10)
    sub = log.subscribe(0)
    got: list[int] = []

    async def writer() -> None:
        for index in range(300, 3000):
            log.append(draft(index))
            if index % 97 == 0:
                await asyncio.sleep(0)

    async def reader() -> None:
        while len(got) < 3000:
            got.extend(seqs(await sub.next_batch(100)))

    await asyncio.wait_for(asyncio.gather(writer(), reader()), 30)
    assert got == list(range(1, 3001))
    sub.close()
    assert log.subscriber_count == 0


async def test_a_reader_far_behind_catches_up_from_the_store_and_rejoins_live(store: Store) -> None:
    log = SessionEventLog("s1", store, tail_size=50)
    slow = log.subscribe(0)
    fast = log.subscribe(0)
    fill(log, 5000)
    store.sync(10)
    fill(log, 100, 5000)
    store.sync(10)
    # Both are 5100 events behind and the tail holds ~150: they read the store first.
    for sub, batch in ((fast, 10_000), (slow, 512)):
        got: list[int] = []
        while len(got) < 5100:
            got.extend(seqs(await sub.next_batch(batch)))
        assert got == list(range(1, 5101))
    # Both now wait on the live tail.
    waiting = asyncio.gather(slow.next_batch(), fast.next_batch())
    await asyncio.sleep(0)
    log.append(draft(5100))
    assert [seqs(b) for b in await asyncio.wait_for(waiting, 5)] == [[5101], [5101]]


async def test_next_times_out_and_close_wakes_a_waiting_reader(store: Store) -> None:
    log = SessionEventLog("s1", store)
    sub = log.subscribe(0)
    assert await sub.next(timeout=0.01) is None
    waiting = asyncio.ensure_future(sub.next_batch())
    await asyncio.sleep(0)
    sub.close()
    assert await asyncio.wait_for(waiting, 5) == []


async def test_a_cancelled_reader_leaves_nothing_behind(store: Store) -> None:
    log = SessionEventLog("s1", store)
    for _ in range(100):
        sub = log.subscribe(0)
        task = asyncio.ensure_future(sub.next_batch())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        sub.close()
    assert log._waiters == []
    assert log.subscriber_count == 0


def test_raw_payload_text_is_kept_as_given() -> None:
    class Wire(dict[str, Any]):
        __slots__ = ("json_text",)
        json_text: str

    message = Wire({"jsonrpc": "2.0", "method": "x"})
    message.json_text = '{"jsonrpc":"2.0","method":"x"}'
    log = SessionEventLog("s1", MemoryEventStore())
    event = log.append(draft(0, raw=message))
    assert event is not None and event.raw_json == message.json_text
    plain = log.append(draft(1, raw={"a": [1, "é"]}))
    assert plain is not None and plain.raw_json == '{"a":[1,"é"]}'
    assert json.loads(plain.render(True))["raw"] == {"a": [1, "é"]}
    assert json.loads(plain.render(False))["raw"] is None
    listed = log.append(draft(2, raw=[message, message]))
    assert listed is not None and listed.raw_json == "[" + message.json_text + "," + message.json_text + "]"
    mixed = log.append(draft(3, raw=[message, {"b": None}]))
    assert mixed is not None and json.loads(str(mixed.raw_json)) == [{"jsonrpc": "2.0", "method": "x"}, {"b": None}]


@pytest.mark.parametrize(
    ("session_id", "native", "synthetic", "data"),
    [
        ("s1", None, True, {"metadata": None}),
        (
            'we"ird/\\id\u2028é',
            "n\nat\u00ffive",
            False,
            {"delta": 'a\r\nb\t"c" \u0001 😀', "n": 1.5, "x": [True, None]},
        ),
    ],
)
def test_the_written_out_envelope_is_exactly_the_serialised_dict(
    session_id: str, native: str | None, synthetic: bool, data: dict[str, Any]
) -> None:
    from app.events.envelope import envelope_json, format_time

    ns = 1_795_320_864_667_647_668
    expected = {
        "event_id": "evt_7",
        "sequence": 7,
        "time": format_time(ns),
        "session_id": session_id,
        "native_session_id": native,
        "synthetic": synthetic,
        "source": "daemon" if synthetic else "agent",
        "type": "item.delta",
        "data": data,
        "raw": None,
    }
    text = envelope_json(
        sequence=7,
        time_ns=ns,
        session_id=session_id,
        native_session_id=native,
        synthetic=synthetic,
        event_type="item.delta",
        data=data,
    )
    assert text == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    assert "\n" not in text and "\r" not in text


def test_time_is_formatted_as_the_legacy_server_did_across_seconds() -> None:
    from datetime import UTC, datetime

    from app.events.envelope import format_time

    def expected(ns: int) -> str:
        seconds, frac = divmod(ns, 1_000_000_000)
        base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{base}.{frac:09d}".rstrip("0") + "Z" if frac else base + "Z"

    start = 1_795_320_864_000_000_000
    # Within a second, across its end, a clock that steps back, whole seconds, trailing zeros.
    for ns in (start + 667_647_668, start + 999_999_999, start + 1_000_000_001, start - 1, start, start + 100):
        assert format_time(ns) == expected(ns)
    assert format_time(start + 120_000_000) == "2026-11-22T04:14:24.12Z"


async def test_a_failure_to_store_never_feeds_itself(
    store: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event of one session fails to store (a problem of the data, not of the disk): the
    session gets one error event for the batch, that event failing too makes no other, and the
    batch is one log line; another session's events in the same batch are all stored."""
    original = store.backend.insert

    def refusing(events: list[StoredEvent]) -> dict[str, int]:
        if any(e.session_id == "doomed" for e in events):
            raise ValueError("this session's events cannot be kept")
        marks: dict[str, int] = original(events)
        return marks

    monkeypatch.setattr(store.backend, "insert", refusing)
    store.COALESCE = 0.2  # both sessions' events in one batch
    doomed = SessionEventLog("doomed", store)
    good = SessionEventLog("good", store)
    with caplog.at_level(logging.ERROR, logger="acp_rest_bridge.events"):
        fill(doomed, 50)
        fill(good, 100)
        await wait_for(lambda: store.flushed_sequence("doomed") >= 51 and good.count == 100)
        await asyncio.sleep(0.5)  # time for any error event about the error event (there is none)
    store.COALESCE = 0
    assert doomed.last_sequence == 51
    assert "could not be stored" in json.loads(doomed.read_after(50, 1)[0].json)["data"]["message"]
    lines = [r for r in caplog.records if r.name == "acp_rest_bridge.events"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "50 entries of sessions doomed could not be stored" in lines[0].getMessage()
    assert seqs(good.read_after(0, None)) == list(range(1, 101))
