"""The event store's SQLite backend (stdlib ``sqlite3``): ``events.sqlite3`` in the data dir.

``BatchWriter(SqliteBackend(data_dir))`` is a single bridge's event store (``writer.py`` has the
writer, the queue and the guarantees). Here: the file, locked against a second server on the same
data dir; its schema, versioned in ``PRAGMA user_version`` (``MIGRATIONS``); the writer's connection
(WAL, ``synchronous=NORMAL``: a commit costs no fsync, and a crash of the bridge loses nothing that
was committed), on which a batch of events is one multi-row ``INSERT``, with a second one for small
batches whose statements are prepared once (sqlite3's statement cache); and the readers'
connections, one per thread (WAL lets them read while the writer commits).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TypeAlias

from .envelope import pack, stored_time_ns, unpack
from .schema import Migration, migrate
from .store import LogStats, StoreError
from .stored import StoredEvent
from .writer import BatchWriter, Stored, events_size

log = logging.getLogger("acp_rest_bridge.events")

# Each entry moves the schema one version on; never edit one that has shipped, add the next.
MIGRATIONS: tuple[Migration, ...] = (
    # 1: the first schema (a data dir written before versions were kept has it, or version 2's).
    (
        """CREATE TABLE sessions (
    key INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    record TEXT,
    event_count INTEGER NOT NULL DEFAULT 0,
    last_sequence INTEGER NOT NULL DEFAULT 0,
    updated_ns INTEGER NOT NULL DEFAULT 0
)""",
        """CREATE TABLE events (
    session_key INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    json TEXT NOT NULL,
    raw TEXT,
    PRIMARY KEY (session_key, sequence)
)""",
    ),
    # 2: events clustered by (session, sequence), in the primary key's b-tree: with 16 KiB pages a
    # typical event (0.3-1 KiB with its raw payload) stays inside it, and an append costs half.
    (
        "ALTER TABLE events RENAME TO events_1",
        """CREATE TABLE events (
    session_key INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    json TEXT NOT NULL,
    raw TEXT,
    PRIMARY KEY (session_key, sequence)
) WITHOUT ROWID""",
        "INSERT INTO events SELECT session_key, sequence, type, json, raw FROM events_1 ORDER BY session_key, sequence",
        "DROP TABLE events_1",
    ),
    # 3: versioned; no trigger keeps the sessions' counters (a release of version 2 made one, and later
    # ones kept it: an UPDATE per event written). A log is gap-free, so its first and last events,
    # found through the primary key at start, give its count; the counter columns stay, unused.
    ("DROP TRIGGER IF EXISTS events_counted",),
)
SCHEMA_VERSION = len(MIGRATIONS)


def unversioned_version(conn: sqlite3.Connection) -> int:
    """The version of a database without one: 0 (new), else its events table tells."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if row is None:
        return 0
    return 2 if "WITHOUT ROWID" in str(row[0]).upper() else 1


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    return "INSERT INTO events VALUES " + ",".join(["(?,?,?,?,?)"] * rows)


# SQLite result codes that mean the disk, not the data: the batch is kept and tried again.
_STORAGE_CODES = {
    "SQLITE_FULL": "no space left on device",
    "SQLITE_IOERR": "I/O error",
    "SQLITE_READONLY": "read-only",
    "SQLITE_CANTOPEN": "cannot open",
    "SQLITE_BUSY": "busy",
    "SQLITE_LOCKED": "locked",
    "SQLITE_PROTOCOL": "locking protocol",
    "SQLITE_NOMEM": "out of memory",
    "SQLITE_CORRUPT": "corrupt",
    "SQLITE_NOTADB": "not a database",
}


class SqliteBackend:
    """``events.sqlite3`` under the batch writer (a ``writer.StoreBackend``)."""

    FILENAME = "events.sqlite3"
    ROWS_PER_INSERT = 6000  # 5 parameters each: SQLite allows 32,766 per statement
    # A batch of at most this many events and bytes is written on the connection whose statements
    # are kept prepared (a cached statement keeps a copy of the values last bound to it, so only
    # small ones may be cached: what they keep alive is bounded by SMALL_ROWS x SMALL_BYTES).
    SMALL_ROWS = 16
    SMALL_BYTES = 64 * 1024
    # A small batch commits in tens of microseconds (a WAL append, no fsync, no network): the
    # writer may commit it on the event loop.
    inline_commits = True

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / self.FILENAME
        self.where = str(self.path)
        # Session id -> the key its rows are stored under: changed by the writer thread (and open),
        # read by the readers.
        self._keys: dict[str, int] = {}
        self._next_key = 1
        self._conn: sqlite3.Connection | None = None
        self._small: sqlite3.Connection | None = None  # the writer's, for small batches, statements cached
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._lock_fd: int | None = None

    @property
    def connection(self) -> sqlite3.Connection:
        """The writer's connection (used by the writer thread only)."""
        assert self._conn is not None, "store not open"
        return self._conn

    @property
    def executor(self) -> Executor:
        assert self._executor is not None, "store not open"
        return self._executor

    # ---- lifecycle -----------------------------------------------------------------------------
    def open(self) -> Stored:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / (self.FILENAME + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot use data dir {self.directory}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"data dir {self.directory} is in use by another acp-rest-bridge server") from exc
        self._lock_fd = fd
        conn = None
        try:
            conn = self._connect()
            os.chmod(self.path, 0o600)  # agent output and session configs: the owner's only
            migrate(conn, MIGRATIONS, unversioned_version, self.where)
            stored = self._load(conn)
        except (sqlite3.Error, OSError, StoreError) as exc:
            if conn is not None:
                conn.close()
            self._release_lock()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._small = self._connect(cached=True)
        except sqlite3.Error as exc:
            conn.close()
            self._release_lock()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._conn = conn
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-reader")
        return stored

    def _connect(self, cached: bool = False) -> sqlite3.Connection:
        # Made here, then used by the writer (its thread, or the event loop while holding the
        # writer's lock). The main one caches no statement: a cached statement keeps a copy of the
        # values last bound to it, and the writer's multi-row INSERTs would keep megabytes of event
        # text alive that way; the small batches' one does (``SMALL_ROWS``).
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=self.SMALL_ROWS if cached else 0
        )
        # Events are clustered by (session, sequence); 16 KiB pages keep a typical event (0.3-1 KiB
        # with its raw payload) inside the b-tree page, which makes appends about twice as cheap.
        # (It takes effect in a new database only.)
        conn.execute("PRAGMA page_size=16384")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the writer has it done when idle (checkpoint)
        # Statement journals of a multi-statement transaction in memory, not in a temporary file
        # created and unlinked per commit.
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    def _load(self, conn: sqlite3.Connection) -> Stored:
        # A session whose create did not complete left a row without a record: it never existed.
        conn.execute("BEGIN")
        conn.execute("DELETE FROM events WHERE session_key IN (SELECT key FROM sessions WHERE record IS NULL)")
        conn.execute("DELETE FROM sessions WHERE record IS NULL")
        conn.execute("COMMIT")
        stored = Stored()
        rows = conn.execute("SELECT key, id, record, updated_ns FROM sessions ORDER BY key").fetchall()
        for key, session_id, record, updated in rows:
            self._keys[session_id] = key
            self._next_key = max(self._next_key, key + 1)
            stored.sessions[session_id] = _log_stats(conn, key, updated)
            try:
                value = json.loads(record)
            except ValueError:
                log.error("session %s: unreadable record in %s, skipped", session_id, self.path)
                continue
            if isinstance(value, dict):
                stored.records.append(value)
        return stored

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        if self._small is not None:
            self._small.close()
            self._small = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    # ---- the writer thread -----------------------------------------------------------------------
    def write(self, events: list[StoredEvent]) -> dict[str, int]:
        if len(events) <= self.SMALL_ROWS and self._small is not None:
            if events_size(events) <= self.SMALL_BYTES:
                return self.insert(events, self._small)  # one prepared statement, its own transaction
        if len(events) <= self.ROWS_PER_INSERT:
            return self.insert(events)  # one statement: a transaction of its own
        with self.transaction():
            return self.insert(events)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        conn = self.connection
        conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        conn = self.connection
        conn.execute("SAVEPOINT entry")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK TO entry")
                conn.execute("RELEASE entry")
            raise
        conn.execute("RELEASE entry")

    def insert(self, events: list[StoredEvent], conn: sqlite3.Connection | None = None) -> dict[str, int]:
        # Many rows per statement: sqlite3 lets go of the GIL around every statement step, and
        # while the event loop is busy each handover back costs up to a switch interval (5 ms).
        # executemany() would pay that per event; this pays it per ROWS_PER_INSERT events.
        conn = conn or self.connection
        marks: dict[str, int] = {}
        size = self.ROWS_PER_INSERT
        for start in range(0, len(events), size):
            chunk = events[start : start + size] if len(events) > size else events
            try:
                params = self._rows(chunk)
            except KeyError:  # events of a session deleted since (retention): not written
                chunk = [e for e in chunk if e.session_id in self._keys]
                if not chunk:
                    continue
                params = self._rows(chunk)
            conn.execute(_insert_sql(len(chunk)), params)
            for e in chunk:
                marks[e.session_id] = e.sequence
        return marks

    def _rows(self, events: list[StoredEvent]) -> list[object]:
        """The INSERT's parameters: each event without what its row and its session say (``envelope.pack``)."""
        keys = self._keys
        return [
            v
            for e in events
            for v in (
                keys[e.session_id],
                e.sequence,
                e.type,
                *pack(e.session_id, e.sequence, e.type, e.json, e.raw_json),
            )
        ]

    def save_session(self, session_id: str, record: str | None) -> None:
        key = self._keys.get(session_id)
        if key is None:
            key = self._keys[session_id] = self._next_key
            self._next_key += 1
        conn = self.connection
        conn.execute("INSERT OR IGNORE INTO sessions (key, id) VALUES (?, ?)", (key, session_id))
        if record is not None:
            conn.execute("UPDATE sessions SET record = ? WHERE key = ?", (record, key))

    def delete_session(self, session_id: str) -> None:
        # By id, not by key: a transaction rolled back and tried again finds the rows still there.
        self._keys.pop(session_id, None)
        conn = self.connection
        conn.execute("DELETE FROM events WHERE session_key IN (SELECT key FROM sessions WHERE id = ?)", (session_id,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def checkpoint(self) -> None:
        """Copy the WAL into the database file. Done when the writer is idle (or the WAL has grown
        large), not in the middle of a burst as SQLite's automatic checkpoint would."""
        try:
            self.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("checkpoint of %s failed: %s", self.path, exc)

    def storage_cause(self, exc: BaseException) -> str | None:
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
            exc, sqlite3.IntegrityError | sqlite3.ProgrammingError | sqlite3.InterfaceError | sqlite3.DataError
        ):
            name = getattr(exc, "sqlite_errorname", "") or ""
            for prefix, what in _STORAGE_CODES.items():
                if name.startswith(prefix):
                    return f"{what} ({exc})"
            return str(exc)
        return None

    # ---- reading -----------------------------------------------------------------------------
    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # Closed by close(), from another thread.
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only=1")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def read(self, session_id: str, after: int, limit: int | None, before: int | None) -> list[StoredEvent]:
        key = self._keys.get(session_id)
        if key is None:
            return []
        rows = self._reader().execute(
            "SELECT sequence, type, json, raw FROM events WHERE session_key = ? AND sequence > ? AND sequence < ?"
            " ORDER BY sequence LIMIT ?",
            (key, after, before if before is not None else 2**62, limit if limit is not None else -1),
        )
        return [
            StoredEvent(session_id, seq, event_type, *unpack(session_id, seq, event_type, body, raw))
            for seq, event_type, body, raw in rows
        ]

    def read_stats(self, session_id: str) -> LogStats:
        key = self._keys.get(session_id)
        return LogStats() if key is None else _log_stats(self._reader(), key, 0)


def _log_stats(conn: sqlite3.Connection, key: int, updated_ns: int) -> LogStats:
    """Count, last sequence and time of the session's stored events (two primary-key lookups)."""
    row = conn.execute(
        "SELECT sequence, json FROM events WHERE session_key = ? ORDER BY sequence DESC LIMIT 1", (key,)
    ).fetchone()
    if row is None:
        return LogStats(0, 0, updated_ns)
    last, last_json = row
    (first,) = conn.execute("SELECT min(sequence) FROM events WHERE session_key = ?", (key,)).fetchone()
    return LogStats(last - first + 1, last, max(updated_ns, stored_time_ns(last_json)))


# The event store of a single bridge (annotations).
SqliteEventStore: TypeAlias = BatchWriter[SqliteBackend]
