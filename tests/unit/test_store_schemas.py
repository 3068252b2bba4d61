"""The SQLite schemas are versioned (``PRAGMA user_version``) and migrated from every earlier version:
the event store's ``events.sqlite3`` and the webhook outbox's ``webhooks.sqlite3``. A data dir of each
earlier shape is built here as its release wrote it, with data; opening it keeps the data and ends at
the current schema (the same as a new one's); a database newer than the code is refused. (PostgreSQL's:
``tests/unit/test_postgres_store.py``.)"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from app.events import postgres, sqlite
from app.events.envelope import envelope_json, pack
from app.events.log import SessionEventLog
from app.events.model import ITEM_DELTA, EventDraft
from app.events.sqlite import SCHEMA_VERSION, SqliteBackend
from app.events.store import StoreError
from app.events.writer import BatchWriter
from app.webhooks import sqlite_outbox
from app.webhooks.outbox import Delivery
from app.webhooks.sqlite_outbox import SqliteOutbox

# ---- the event store's schemas before versions were kept (``git log -p app/events/sqlite.py``) ----------
_SESSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS sessions (
    key INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    record TEXT,
    event_count INTEGER NOT NULL DEFAULT 0,
    last_sequence INTEGER NOT NULL DEFAULT 0,
    updated_ns INTEGER NOT NULL DEFAULT 0
);"""
_EVENTS_TABLE = """
CREATE TABLE IF NOT EXISTS events (
    session_key INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    json TEXT NOT NULL,
    raw TEXT,
    PRIMARY KEY (session_key, sequence)
)"""
HISTORIC = {
    # The first store: events in a rowid table.
    "1": _SESSIONS_TABLE + _EVENTS_TABLE + ";",
    # Events clustered by (session, sequence).
    "2": _SESSIONS_TABLE + _EVENTS_TABLE + " WITHOUT ROWID;",
    # ... with the trigger that kept the sessions' counters for a while (later releases stopped making
    # it, but kept it where it was).
    "2 counted": _SESSIONS_TABLE
    + _EVENTS_TABLE
    + """ WITHOUT ROWID;
-- The session's counters follow its events inside SQLite: a batch is then one statement, and the
-- writer thread waits for the interpreter lock once per batch, not once per statement.
CREATE TRIGGER IF NOT EXISTS events_counted AFTER INSERT ON events BEGIN
    UPDATE sessions SET event_count = event_count + 1, last_sequence = max(last_sequence, NEW.sequence)
    WHERE key = NEW.session_key;
END;
""",
}

NS = 1_795_320_864_667_647_668


def envelope(session_id: str, sequence: int, delta: str) -> str:
    return envelope_json(
        sequence=sequence,
        time_ns=NS + sequence,
        session_id=session_id,
        native_session_id="native-1",
        synthetic=False,
        event_type=ITEM_DELTA,
        data={"item_id": "itm_1", "native_item_id": None, "delta": delta},
    )


RAW = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"native-1","update":{"x":%d}}}'


def expected_events(session_id: str, count: int) -> list[tuple[int, str, str | None]]:
    return [(n, envelope(session_id, n, f"d{n}"), RAW % n if n % 2 else None) for n in range(1, count + 1)]


def historic_data_dir(directory: Path, shape: str) -> None:
    """A data dir as a release of that shape left it: two sessions (one with its events stored
    whole, as the first releases did, one in the packed form of later ones), a create that never
    completed, a session with no events."""
    directory.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(directory / SqliteBackend.FILENAME, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(HISTORIC[shape])
        db.execute("BEGIN")
        for key, session_id in ((1, "whole"), (2, "packed"), (4, "empty")):
            record = json.dumps({"info": {"sessionId": session_id, "title": "é"}})
            db.execute("INSERT INTO sessions (key, id, record) VALUES (?, ?, ?)", (key, session_id, record))
        db.execute("INSERT INTO sessions (key, id) VALUES (3, 'half')")
        for key, session_id, count in ((1, "whole", 40), (2, "packed", 25), (3, "half", 3)):
            for sequence, body, raw in expected_events(session_id, count):
                if session_id != "whole":
                    body, raw = pack(session_id, sequence, ITEM_DELTA, body, raw)
                db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (key, sequence, ITEM_DELTA, body, raw))
        db.execute("COMMIT")


def schema_of(path: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
        return [(kind, name, " ".join(str(sql).split())) for kind, name, sql in rows]


def version_of(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


@pytest.fixture(scope="module")
def current_schema(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    """The schema of a new data dir's store."""
    directory = tmp_path_factory.mktemp("new")
    store = BatchWriter(SqliteBackend(directory))
    store.open()
    store.close()
    return schema_of(directory / SqliteBackend.FILENAME)


@pytest.mark.parametrize("shape", list(HISTORIC))
async def test_an_event_store_of_every_earlier_version_is_migrated_keeping_its_data(
    shape: str, tmp_path: Path, current_schema: list[tuple[str, str, str]]
) -> None:
    historic_data_dir(tmp_path, shape)
    path = tmp_path / SqliteBackend.FILENAME
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    try:
        assert sorted(r["info"]["sessionId"] for r in store.load_sessions()) == ["empty", "packed", "whole"]
        for session_id, count in (("whole", 40), ("packed", 25)):
            got = [(e.sequence, e.json, e.raw_json) for e in store.read(session_id, 0, None)]
            assert got == expected_events(session_id, count)
            stats = store.stats(session_id)
            assert (stats.count, stats.last_sequence, stats.updated_ns) == (count, count, NS + count)
        assert store.read("half", 0, None) == [] and store.stats("half").last_sequence == 0
        # Writing goes on where the logs ended, also in a session with no events yet.
        for session_id, after in (("whole", 40), ("empty", 0)):
            log = SessionEventLog(session_id, store)
            event = log.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": "new"}))
            assert event is not None and event.sequence == after + 1
        assert store.sync(10)
    finally:
        store.close()
    assert version_of(path) == SCHEMA_VERSION
    assert schema_of(path) == current_schema
    with closing(sqlite3.connect(path)) as db:
        counts = dict(db.execute("SELECT id, count(*) FROM events JOIN sessions ON key = session_key GROUP BY id"))
    assert counts == {"whole": 41, "packed": 25, "empty": 1}
    # Opened again (now versioned): nothing to do, nothing changed.
    again = BatchWriter(SqliteBackend(tmp_path))
    again.open()
    try:
        assert [e.sequence for e in again.read("whole", 38, None)] == [39, 40, 41]
    finally:
        again.close()
    assert schema_of(path) == current_schema


def test_a_migration_that_fails_leaves_the_database_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, current_schema: list[tuple[str, str, str]]
) -> None:
    historic_data_dir(tmp_path, "2 counted")
    path = tmp_path / SqliteBackend.FILENAME
    before = schema_of(path)
    failing = (*sqlite.MIGRATIONS[:-1], (*sqlite.MIGRATIONS[-1], "SELECT * FROM no_such_table"))
    monkeypatch.setattr(sqlite, "MIGRATIONS", failing)
    with pytest.raises(StoreError, match=r"cannot open .*events\.sqlite3: no such table"):
        BatchWriter(SqliteBackend(tmp_path)).open()
    assert schema_of(path) == before and version_of(path) == 0  # the trigger's drop undone too
    monkeypatch.undo()
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    try:
        assert [e.sequence for e in store.read("packed", 0, None)] == list(range(1, 26))
    finally:
        store.close()
    assert schema_of(path) == current_schema


def test_a_new_event_store_starts_at_the_current_version(tmp_path: Path) -> None:
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    store.close()
    assert version_of(tmp_path / SqliteBackend.FILENAME) == SCHEMA_VERSION == len(sqlite.MIGRATIONS)


def test_an_event_store_of_a_newer_release_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    store.close()
    path = tmp_path / SqliteBackend.FILENAME
    with closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = schema_of(path)
    with pytest.raises(StoreError, match=rf"events\.sqlite3 has schema version {SCHEMA_VERSION + 1}, newer than"):
        BatchWriter(SqliteBackend(tmp_path)).open()
    assert schema_of(path) == before and version_of(path) == SCHEMA_VERSION + 1
    # The data dir was let go of: once the newer release is back (here: the version), it opens.
    with closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    store.close()


# ---- the webhook outbox ------------------------------------------------------------------------------------
# Its one schema before versions were kept (``git log -p app/webhooks/sqlite_outbox.py``).
OUTBOX_1 = """
CREATE TABLE IF NOT EXISTS deliveries (
    endpoint TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    failed TEXT,
    failed_at REAL,
    PRIMARY KEY (endpoint, session_id, sequence)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS marks (
    session_id TEXT PRIMARY KEY,
    sequence INTEGER NOT NULL
) WITHOUT ROWID;
"""


def test_an_outbox_of_the_earlier_version_is_migrated_keeping_its_data(tmp_path: Path) -> None:
    fresh = SqliteOutbox(tmp_path / "new")
    (tmp_path / "new").mkdir()
    assert fresh.open() is True  # new: it has seen no session
    fresh.close()
    path = tmp_path / SqliteOutbox.FILENAME
    pending = [Delivery("http://a/hook", "s1", n, "item.completed", f'{{"n":{n}}}', n, 10.0 * n) for n in (3, 5)]
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.executescript(OUTBOX_1)
        for d in pending:
            db.execute(
                "INSERT INTO deliveries (endpoint, session_id, sequence, event_type, payload, attempts, next_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (d.endpoint, d.session_id, d.sequence, d.event_type, d.payload, d.attempts, d.next_at),
            )
        db.execute("INSERT INTO deliveries VALUES ('http://a/hook', 's1', 1, 'error', '{}', 9, 0, 'gave up', 1.0)")
        db.executemany("INSERT INTO marks VALUES (?, ?)", [("s1", 5), ("s2", 12)])
    outbox = SqliteOutbox(tmp_path)
    assert outbox.open() is False  # it has seen sessions: what it missed is caught up, not skipped
    try:
        assert outbox.pending() == pending
        assert outbox.marks() == {"s1": 5, "s2": 12}
        assert outbox.prune(2.0) == 1  # the failed row, kept as it was
    finally:
        outbox.close()
    assert version_of(path) == sqlite_outbox.SCHEMA_VERSION
    assert schema_of(path) == schema_of(tmp_path / "new" / SqliteOutbox.FILENAME)
    assert version_of(tmp_path / "new" / SqliteOutbox.FILENAME) == sqlite_outbox.SCHEMA_VERSION


def test_an_outbox_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    outbox = SqliteOutbox(tmp_path)
    outbox.open()
    outbox.close()
    with closing(sqlite3.connect(tmp_path / SqliteOutbox.FILENAME)) as db:
        db.execute(f"PRAGMA user_version = {sqlite_outbox.SCHEMA_VERSION + 1}")
    with pytest.raises(
        StoreError, match=r"webhooks\.sqlite3 has schema version \d+, newer than this acp-rest-bridge's"
    ):
        SqliteOutbox(tmp_path).open()


# ---- migrations that have shipped stay as they shipped ---------------------------------------------------
SHIPPED = {
    "events.sqlite3": (sqlite.MIGRATIONS, ["144d71eb1c212c4b", "bfa28f1ec840c736", "779ae1d908a97c5e"]),
    "webhooks.sqlite3": (sqlite_outbox.MIGRATIONS, ["f8b2630376e4252b"]),
    "postgres": (postgres.MIGRATIONS, ["d6f01a3eacac5685", "ae471b104cb7e262"]),
}


@pytest.mark.parametrize("schema", list(SHIPPED))
def test_a_shipped_migration_is_never_edited(schema: str) -> None:
    """A database at version N was made by migrations 1..N as they were then: one edited later would
    leave such databases unlike new ones. A change is a new migration (and a line here)."""
    migrations, digests = SHIPPED[schema]
    found = [hashlib.sha256(repr(m).encode()).hexdigest()[:16] for m in migrations]
    assert found[: len(digests)] == digests
