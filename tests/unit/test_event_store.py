"""The event log over its stores: durable SQLite store, bounded tail, cursor readers."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.events.log import SessionEventLog, StoredEvent
from app.events.model import ITEM_DELTA, EventDraft
from app.events.sqlite import SqliteEventStore, StoreError
from app.events.store import EventStore, MemoryEventStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEventStore]:
    s = SqliteEventStore(tmp_path)
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


def reopen(path: Path) -> SqliteEventStore:
    s = SqliteEventStore(path)
    s.open()
    return s


# ---- the store ------------------------------------------------------------------------------
def test_events_are_stored_once_with_their_sequence_and_survive_a_reopen(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    log = SessionEventLog("s1", store)
    log.native_session_id = "native-1"
    fill(log, 50)
    log.append(draft(50, raw={"jsonrpc": "2.0", "method": "session/update", "params": {"x": "é\n"}}))
    before = [(e.sequence, e.type, e.json, e.raw_json) for e in log.read_after(0, None)]
    store.save_session("s1", {"info": {"sessionId": "s1"}})
    store.close()  # no explicit sync: close commits what is queued

    db = sqlite3.connect(tmp_path / SqliteEventStore.FILENAME)
    assert db.execute("SELECT count(*), count(DISTINCT sequence) FROM events").fetchone() == (51, 51)
    assert db.execute("SELECT event_count, last_sequence FROM sessions WHERE id = 's1'").fetchone() == (51, 51)
    db.close()

    again = reopen(tmp_path)
    try:
        assert again.load_sessions() == [{"info": {"sessionId": "s1"}}]
        restored = SessionEventLog("s1", again)
        assert (restored.count, restored.last_sequence) == (51, 51)
        assert restored.updated_ns == log.updated_ns
        after = [(e.sequence, e.type, e.json, e.raw_json) for e in restored.read_after(0, None)]
        assert after == before
        assert json.loads(after[-1][3])["params"]["x"] == "é\n"
        # A later append continues the sequence.
        assert restored.append(draft(51)).sequence == 52
    finally:
        again.close()


def test_reads_see_events_the_writer_has_not_committed_yet(store: SqliteEventStore) -> None:
    store.COALESCE = 5.0  # hold the writer back
    log = SessionEventLog("s1", store)
    fill(log, 100)
    assert store.flushed_sequence("s1") < 100
    assert seqs(log.read_after(0, None)) == list(range(1, 101))
    assert seqs(log.read_after(90, 5)) == list(range(91, 96))
    assert store.sync(10)
    assert store.flushed_sequence("s1") == 100


def test_the_tail_stays_bounded_and_older_events_come_from_the_store(store: SqliteEventStore) -> None:
    log = SessionEventLog("s1", store, tail_size=100)
    for chunk in range(20):
        fill(log, 500, chunk * 500)
        store.sync(10)
    fill(log, 100, 10_000)  # triggers trimming now that everything before is committed
    assert log.tail_length <= 100 + 64 + 100
    assert seqs(log.read_after(0, None)) == list(range(1, 10_101))
    assert seqs(log.read_after(5000, 3)) == [5001, 5002, 5003]
    assert seqs(log.read_after(10_050, None)) == list(range(10_051, 10_101))


def test_the_tail_never_drops_an_uncommitted_event(store: SqliteEventStore) -> None:
    store.COALESCE = 0.5
    log = SessionEventLog("s1", store, tail_size=10)
    fill(log, 1000)
    assert log.tail_length >= 1000 - store.flushed_sequence("s1")
    assert seqs(log.read_after(0, None)) == list(range(1, 1001))


def test_a_second_server_on_the_same_data_dir_is_refused(store: SqliteEventStore, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="in use by another"):
        SqliteEventStore(tmp_path).open()


def test_a_session_whose_create_did_not_complete_is_forgotten(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    SessionEventLog("half", store).append(draft(0))  # events, but no session record
    store.save_session("whole", {"info": {"sessionId": "whole"}})
    store.close()
    again = reopen(tmp_path)
    try:
        assert again.load_sessions() == [{"info": {"sessionId": "whole"}}]
        assert SessionEventLog("half", again).last_sequence == 0
    finally:
        again.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_page_follows_the_legacy_offset_and_limit_rules(kind: str, tmp_path: Path) -> None:
    store: EventStore = MemoryEventStore() if kind == "memory" else SqliteEventStore(tmp_path)
    store.open()
    try:
        log = SessionEventLog("s1", store, tail_size=8)
        fill(log, 30)
        if isinstance(store, SqliteEventStore):
            store.sync(10)
        fill(log, 20, 30)  # trims the tail: the first pages come from the store
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


# ---- readers -------------------------------------------------------------------------------
async def test_a_reader_gets_backlog_then_live_without_gap_or_duplicate(store: SqliteEventStore) -> None:
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


async def test_a_reader_far_behind_catches_up_from_the_store_and_rejoins_live(store: SqliteEventStore) -> None:
    log = SessionEventLog("s1", store, tail_size=50)
    slow = log.subscribe(0)
    fast = log.subscribe(0)
    fill(log, 5000)
    store.sync(10)
    fill(log, 100, 5000)
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


async def test_next_times_out_and_close_wakes_a_waiting_reader(store: SqliteEventStore) -> None:
    log = SessionEventLog("s1", store)
    sub = log.subscribe(0)
    assert await sub.next(timeout=0.01) is None
    waiting = asyncio.ensure_future(sub.next_batch())
    await asyncio.sleep(0)
    sub.close()
    assert await asyncio.wait_for(waiting, 5) == []


async def test_a_cancelled_reader_leaves_nothing_behind(store: SqliteEventStore) -> None:
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

    message = Wire({"jsonrpc": "2.0", "method": "x"})
    message.json_text = '{"jsonrpc":"2.0","method":"x"}'
    log = SessionEventLog("s1", MemoryEventStore())
    event = log.append(draft(0, raw=message))
    assert event.raw_json == message.json_text
    plain = log.append(draft(1, raw={"a": [1, "é"]}))
    assert plain.raw_json == '{"a":[1,"é"]}'
    assert json.loads(plain.render(True))["raw"] == {"a": [1, "é"]}
    assert json.loads(plain.render(False))["raw"] is None
    listed = log.append(draft(2, raw=[message, message]))
    assert listed.raw_json == "[" + message.json_text + "," + message.json_text + "]"
    mixed = log.append(draft(3, raw=[message, {"b": None}]))
    assert json.loads(mixed.raw_json) == [{"jsonrpc": "2.0", "method": "x"}, {"b": None}]


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
