"""What the PostgreSQL store adds to the SQLite one's guarantees (tests/unit/test_event_store.py runs
those against both): a versioned schema, a database that goes away and comes back, commit notices."""

from __future__ import annotations

import asyncio
import json
import logging

import psycopg
import pytest

from app.events.log import SessionEventLog
from app.events.postgres import EVENTS_CHANNEL, SCHEMA_VERSION, PostgresEventStore
from app.events.sqlite import StoreError
from tests.postgres import PostgresServer
from tests.unit.test_event_store import fill, seqs, wait_for

pytestmark = pytest.mark.postgres


def test_the_schema_is_created_once_and_versioned(database_url: str) -> None:
    for _ in range(2):
        store = PostgresEventStore(database_url)
        store.open()
        store.close()
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


def test_a_database_of_a_newer_bridge_is_refused(database_url: str) -> None:
    PostgresEventStore(database_url).open()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this bridge"):
        PostgresEventStore(database_url).open()


def test_an_unreachable_database_is_a_one_line_error() -> None:
    from tests.support import refused_port

    with (
        refused_port() as port,
        pytest.raises(StoreError, match=r"cannot use the database postgresql://u:\*\*\*@127\.0\.0\.1"),
    ):
        PostgresEventStore(f"postgresql://u:secret@127.0.0.1:{port}/x").open()


async def test_a_commit_notifies_the_sessions_last_sequence(database_url: str) -> None:
    store = PostgresEventStore(database_url)
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
    store = PostgresEventStore(database_url)
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

    runner, follower = PostgresEventStore(database_url), PostgresEventStore(database_url)
    runner.open()
    follower.open()
    follower._pool.timeout = 1.0  # (a reader's wait for a connection, 10 s: the test is about what follows)
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
    store = PostgresEventStore(database_url)
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
    store = PostgresEventStore(database_url)
    store.open()
    try:
        log = SessionEventLog("s1", store)
        fill(log, 10)
        assert store.sync(10)
        conn = store._writer_conn
        assert conn is not None
        again = store.read("s1", 0, None)
        conn.failed = True  # as after a DatabaseUnavailable
        marks: dict[str, int] = {}
        store._insert(conn, store._keys, again, marks)  # (on the writer's connection, the writer idle)
        assert marks == {"s1": 10} and conn.failed is False
        assert seqs(store.read("s1", 0, None)) == list(range(1, 11))
    finally:
        store.close()
