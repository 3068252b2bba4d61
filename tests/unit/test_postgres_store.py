"""What the PostgreSQL store adds to the SQLite one's guarantees (tests/unit/test_event_store.py runs
those against both): a versioned schema migrated from every earlier version, a database that goes away
and comes back, commit notices."""

from __future__ import annotations

import asyncio
import json
import logging

import psycopg
import pytest

from app.events.log import SessionEventLog
from app.events.model import ITEM_DELTA, EventDraft
from app.events.postgres import (
    EVENTS_CHANNEL,
    MIGRATIONS,
    SCHEMA_VERSION,
    PostgresBackend,
    PostgresEventStore,
    stored_row,
)
from app.events.store import StoreError
from app.events.stored import StoredEvent
from app.events.writer import BatchWriter
from app.webhooks.outbox import Delivery
from app.webhooks.postgres_outbox import PostgresOutbox
from tests.postgres import PostgresServer
from tests.unit.test_event_store import fill, seqs, wait_for
from tests.unit.test_store_schemas import expected_events

pytestmark = pytest.mark.postgres


def pg_store(url: str) -> PostgresEventStore:
    return BatchWriter(PostgresBackend(url))


def test_the_schema_is_created_once_and_versioned(database_url: str) -> None:
    for _ in range(2):
        store = pg_store(database_url)
        store.open()
        store.close()
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


def schema_of(url: str) -> dict[str, list[tuple[object, ...]]]:
    """What the database's catalog says of its tables, indexes, triggers and functions."""
    queries = {
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default"
        " FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
        "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "triggers": "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
        "functions": "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1",
    }
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in queries.items()}


@pytest.mark.parametrize("version", range(SCHEMA_VERSION))
def test_a_database_of_every_earlier_version_is_migrated_keeping_its_data(
    version: int, postgres: PostgresServer, database_url: str
) -> None:
    # The database as a bridge of that version left it: its migrations applied one by one, each
    # recorded, and (from version 1) its rows.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for step in range(1, version + 1):
            conn.execute(MIGRATIONS[step - 1])
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (step,))
        if version >= 1:
            conn.execute("INSERT INTO sessions (id, record) VALUES ('s1', %s)", ('{"info":{"sessionId":"s1"}}',))
            rows = [
                stored_row(StoredEvent("s1", n, ITEM_DELTA, body, raw)) for n, body, raw in expected_events("s1", 30)
            ]
            with (
                conn.cursor() as cursor,
                cursor.copy("COPY events (session_id, sequence, type, json, raw) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(row)
            conn.execute("INSERT INTO leases VALUES ('s1', 'http://other:2468', now() + interval '1 hour')")
    store = pg_store(database_url)
    store.open()
    try:
        if version >= 1:
            assert store.load_sessions() == [{"info": {"sessionId": "s1"}}]
            assert [(e.sequence, e.json, e.raw_json) for e in store.read("s1", 0, None)] == expected_events("s1", 30)
            assert store.stats("s1").count == 30
        log = SessionEventLog("s1", store)
        event = log.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": "new"}))
        assert event is not None and event.sequence == (31 if version >= 1 else 1)
        assert store.sync(10)
        # The webhook tables (version 2) work: a new outbox, a delivery kept and found again.
        outbox = PostgresOutbox(store, "http://me:2468", ["http://hook"], frozenset({ITEM_DELTA}), lambda e: "{}", 1.0)
        assert outbox.open() is True
        outbox.set_marks({"s1": event.sequence - 1})  # (as for a new outbox: earlier events are not sent)
        outbox.add([Delivery("http://hook", "s1", event.sequence, ITEM_DELTA, "{}")])
        assert [d.sequence for d in outbox.pending()] == [event.sequence]
    finally:
        store.close()
    with psycopg.connect(database_url) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")] == list(
            range(1, SCHEMA_VERSION + 1)
        )
        if version >= 1:
            assert conn.execute("SELECT owner FROM leases").fetchall() == [("http://other:2468",)]
    fresh = postgres.new_database()
    new = pg_store(fresh)
    new.open()
    new.close()
    assert schema_of(database_url) == schema_of(fresh)


def test_a_database_of_a_newer_bridge_is_refused(database_url: str) -> None:
    store = pg_store(database_url)
    store.open()
    store.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this acp-rest-bridge's"):
        pg_store(database_url).open()


def test_an_unreachable_database_is_a_one_line_error() -> None:
    from tests.support import refused_port

    with (
        refused_port() as port,
        pytest.raises(StoreError, match=r"cannot use the database postgresql://u:\*\*\*@127\.0\.0\.1"),
    ):
        pg_store(f"postgresql://u:secret@127.0.0.1:{port}/x").open()


async def test_a_commit_notifies_the_sessions_last_sequence(database_url: str) -> None:
    store = pg_store(database_url)
    store.open()
    try:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
            await listener.execute(f"LISTEN {EVENTS_CHANNEL}")
            log = SessionEventLog("s1", store)
            fill(log, 20)
            got: list[str] = []
            async with asyncio.timeout(10):
                async for note in listener.notifies():
                    got.append(note.payload)
                    if note.payload == "s1 20":
                        break
            assert all(p.startswith("s1 ") for p in got)
    finally:
        store.close()


async def test_a_database_that_goes_away_is_loud_and_nothing_is_lost_or_reordered(
    postgres: PostgresServer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = pg_store(database_url)
    store.RETRY_DELAYS = (0.05, 0.1, 0.2)
    store.open()
    try:
        log = SessionEventLog("s1", store)
        reader = log.subscribe(0)
        fill(log, 100)
        await wait_for(lambda: log.count == 100)
        with caplog.at_level(logging.ERROR, "acp_rest_bridge.events"):
            await asyncio.to_thread(postgres.stop, "immediate")
            fill(log, 100, 100)
            await wait_for(lambda: store.unavailable is not None, 30)
        assert any("cannot write events to the database" in r.getMessage() for r in caplog.records)
        # Readers still get the new events (from memory), told once why they are not stored yet.
        got: list[int] = []
        types: list[str] = []
        async with asyncio.timeout(10):
            while len(got) < 201:
                batch = await reader.next_batch()
                got.extend(seqs(batch))
                types.extend(e.type for e in batch)
        assert types.count("error") == 1
        fill(log, 50, 200)
        await asyncio.to_thread(postgres.start)
        await wait_for(lambda: store.unavailable is None, 30)
        assert await asyncio.to_thread(store.sync, 30)
        stored = await store.read_async("s1", 0, None)
        assert seqs(stored) == list(range(1, 252))
        errors = [json.loads(e.json)["data"]["code"] for e in stored if e.type == "error"]
        assert errors == ["storage_unavailable"]
    finally:
        if not postgres_running(postgres):
            postgres.start()
        store.close()


async def test_an_sse_reader_whose_first_read_finds_the_database_gone_waits_for_it(
    postgres: PostgresServer, database_url: str
) -> None:
    """A reader on another bridge (its own store, its log's events only in the database) connects
    while the database is up, then the database goes away before its first read: the stream stays
    open with keep-alives, and once the database is back it gets every event, in order, once."""
    from app.api.sse import KEEPALIVE, EventStream
    from tests.unit.test_sse_stream import Client

    runner, follower = pg_store(database_url), pg_store(database_url)
    runner.open()
    follower.open()
    follower.backend._pool.timeout = 1.0  # (a reader's wait for a connection, 10 s: the test is about what follows)
    try:
        fill(SessionEventLog("s1", runner), 20)
        assert await asyncio.to_thread(runner.sync, 30)
        followed = SessionEventLog("s1", follower)
        followed.follow(20)  # as the fleet tells it of the runner's commits: nothing in memory
        await asyncio.to_thread(postgres.stop, "immediate")
        client = Client()
        stream = EventStream(followed, 0, False, stop_at_terminal=False, keepalive=0.2, send_timeout=5.0)
        task = asyncio.create_task(stream(client.scope, client.receive, client.send))
        # Its read fails (at once, or at the pool's timeout): it waits, and says it is there.
        await wait_for(lambda: task.done() or KEEPALIVE in client.bodies(), 30)
        assert not task.done() and b"data:" not in b"".join(client.bodies())
        await asyncio.to_thread(postgres.start)
        await client.until(lambda: b"id: 20\n" in b"".join(client.bodies()), 30)
        frames = b"".join(client.bodies()).decode()
        assert [int(line[4:]) for line in frames.splitlines() if line.startswith("id: ")] == list(range(1, 21))
        client.left.set()
        async with asyncio.timeout(10):
            await task
        assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    finally:
        if not postgres_running(postgres):
            postgres.start()
        runner.close()
        follower.close()


def postgres_running(server: PostgresServer) -> bool:
    try:
        psycopg.connect(server.url, connect_timeout=2).close()
        return True
    except psycopg.Error:
        return False


def test_retention_deletes_a_session_and_its_events(database_url: str) -> None:
    store = pg_store(database_url)
    store.open()
    try:
        fill(SessionEventLog("old", store), 10)
        fill(SessionEventLog("kept", store), 5)
        store.save_session("old", {"info": {"sessionId": "old"}})
        store.save_session("kept", {"info": {"sessionId": "kept"}})
        assert store.sync(10)
        store.delete_session("old")
        assert store.sync(10)
    finally:
        store.close()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT session_id, count(*) FROM events GROUP BY session_id").fetchall() == [("kept", 5)]
        assert conn.execute("SELECT id FROM sessions").fetchall() == [("kept",)]


def test_a_batch_retried_after_a_lost_connection_is_not_written_twice(database_url: str) -> None:
    """The server may have committed a batch whose COMMIT went unanswered: the retry skips it."""
    store = pg_store(database_url)
    store.open()
    try:
        log = SessionEventLog("s1", store)
        fill(log, 10)
        assert store.sync(10)
        conn = store.backend.connection
        again = store.read("s1", 0, None)
        conn.failed = True  # as after a DatabaseUnavailable
        marks = store.backend.write(again)  # (on the writer's connection, the writer idle)
        assert marks == {"s1": 10} and conn.failed is False
        assert seqs(store.read("s1", 0, None)) == list(range(1, 11))
    finally:
        store.close()
