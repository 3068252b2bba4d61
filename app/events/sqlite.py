"""The durable event store: SQLite (stdlib ``sqlite3``) in the data dir, written by one thread.

``append`` only queues the event; a writer thread commits whatever has queued up in one transaction
(WAL, ``synchronous=NORMAL``: a commit costs no fsync, and a crash of the bridge loses nothing that
was committed). Until the writer has committed an event, the session log keeps it in its in-memory
tail, so readers never wait for the disk. ``close`` commits everything still queued.

Reads run on their own connections (WAL lets them proceed while the writer commits); the async
variant runs them on a reader thread so a long catch-up never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .log import StoredEvent
from .store import LogStats

log = logging.getLogger("acp_rest_bridge.events")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    key INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    record TEXT,
    event_count INTEGER NOT NULL DEFAULT 0,
    last_sequence INTEGER NOT NULL DEFAULT 0,
    updated_ns INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    session_key INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    json TEXT NOT NULL,
    raw TEXT,
    PRIMARY KEY (session_key, sequence)
) WITHOUT ROWID;
"""


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    return "INSERT INTO events VALUES " + ",".join(["(?,?,?,?,?)"] * rows)


class StoreError(RuntimeError):
    """The data dir cannot be used (locked by another server, not writable, not a database)."""


# Queue entries: a StoredEvent, or one of these tuples.
_SESSION = 1  # (_SESSION, key, session_id, record_json or None)
_BARRIER = 2  # (_BARRIER, threading.Event): set once everything queued before it is committed
_STOP = 3


class SqliteEventStore:
    FILENAME = "events.sqlite3"
    # Most entries one transaction takes; a larger backlog is committed in several.
    BATCH_MAX = 32_768
    ROWS_PER_INSERT = 1000  # 5 parameters each: SQLite allows 32,766 per statement
    # Queued but uncommitted events beyond which append waits for the writer: this bounds the
    # memory they hold when the writer cannot keep up (a slow disk, an event loop that leaves it
    # no time). The wait is bounded, so a failing disk cannot freeze the server.
    BACKLOG_MAX = 20_000
    BACKLOG_WAIT = 5.0
    RETRY_DELAY = 1.0
    # The writer waits this long after the first queued entry, so a burst is one transaction.
    COALESCE = 0.002
    # Checkpoint after this long without writes, or after this many entries whatever happens.
    CHECKPOINT_IDLE = 0.5
    CHECKPOINT_MAX = 100_000

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / self.FILENAME
        self._queue: queue.SimpleQueue[tuple[Any, ...] | StoredEvent] = queue.SimpleQueue()
        self._keys: dict[str, int] = {}
        self._next_key = 1
        self._flushed: dict[str, int] = {}  # written by the writer thread only
        self._stats: dict[str, LogStats] = {}
        self._records: list[dict[str, Any]] = []
        self._queued = 0  # event loop thread only
        self._written = 0  # writer thread only
        self._progress = threading.Condition()
        self._writer: threading.Thread | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._lock_fd: int | None = None
        self._closed = False
        self.write_error: BaseException | None = None

    # ---- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        if self._lock_fd is not None:
            return
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
        try:
            conn = self._connect()
            os.chmod(self.path, 0o600)  # agent output and session configs: the owner's only
            conn.executescript(SCHEMA)
            self._load(conn)
        except (sqlite3.Error, OSError) as exc:
            self._release_lock()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._writer = threading.Thread(target=self._write_loop, args=(conn,), name="event-writer", daemon=True)
        self._writer.start()
        self._reader_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-reader")

    def _connect(self) -> sqlite3.Connection:
        # Made here, then used by the writer thread only. No statement cache: a cached statement
        # keeps a copy of the values last bound to it, and the writer's multi-row INSERTs would
        # keep megabytes of event text alive that way.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, cached_statements=0)
        # Events are clustered by (session, sequence); 16 KiB pages keep a typical event (0.3-1 KiB
        # with its raw payload) inside the b-tree page, which makes appends about twice as cheap.
        conn.execute("PRAGMA page_size=16384")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the writer checkpoints itself (_checkpoint)
        return conn

    def _load(self, conn: sqlite3.Connection) -> None:
        # A session whose create did not complete left a row without a record: it never existed.
        conn.execute("BEGIN")
        conn.execute("DELETE FROM events WHERE session_key IN (SELECT key FROM sessions WHERE record IS NULL)")
        conn.execute("DELETE FROM sessions WHERE record IS NULL")
        conn.execute("COMMIT")
        rows = conn.execute(
            "SELECT key, id, record, event_count, last_sequence, updated_ns FROM sessions ORDER BY key"
        ).fetchall()
        for key, session_id, record, count, last, updated in rows:
            self._keys[session_id] = key
            self._flushed[session_id] = last
            self._stats[session_id] = LogStats(count, last, updated)
            self._next_key = max(self._next_key, key + 1)
            try:
                value = json.loads(record)
            except ValueError:
                log.error("session %s: unreadable record in %s, skipped", session_id, self.path)
                continue
            if isinstance(value, dict):
                self._records.append(value)

    def close(self) -> None:
        """Commit everything queued, stop the threads, release the data dir."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._queue.put((_STOP,))
            self._writer.join()
        if self._reader_pool is not None:
            with contextlib.suppress(RuntimeError):
                self._reader_pool.submit(self._close_reader).result()
            self._reader_pool.shutdown(wait=True)
        self._close_reader()
        self._release_lock()

    def _close_reader(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    # ---- writing (event loop thread) -------------------------------------------------------------
    def _key(self, session_id: str) -> int:
        key = self._keys.get(session_id)
        if key is None:
            key = self._keys[session_id] = self._next_key
            self._next_key += 1
            self._queue.put((_SESSION, key, session_id, None))
        return key

    def append(self, event: StoredEvent) -> None:
        if event.session_id not in self._keys:
            self._key(event.session_id)
        self._queue.put(event)
        self._queued += 1
        if self._queued - self._written > self.BACKLOG_MAX:
            self._wait_for_writer()

    def _wait_for_writer(self) -> None:
        deadline = time.monotonic() + self.BACKLOG_WAIT
        with self._progress:
            while self._queued - self._written > self.BACKLOG_MAX // 2:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.error("event writer is %d events behind", self._queued - self._written)
                    return
                self._progress.wait(remaining)

    def save_session(self, session_id: str, record: dict[str, Any]) -> None:
        key = self._key(session_id)
        self._queue.put((_SESSION, key, session_id, json.dumps(record, separators=(",", ":"))))

    def sync(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed (tests, shutdown)."""
        done = threading.Event()
        self._queue.put((_BARRIER, done))
        return done.wait(timeout)

    # ---- the writer thread -----------------------------------------------------------------------
    def _write_loop(self, conn: sqlite3.Connection) -> None:
        stop = False
        uncheckpointed = 0
        while not stop:
            try:
                batch: list[Any] = [self._queue.get(timeout=self.CHECKPOINT_IDLE if uncheckpointed else None)]
            except queue.Empty:
                uncheckpointed = self._checkpoint(conn)
                continue
            # Let a burst gather: one transaction per COALESCE seconds at most, not one per event.
            time.sleep(self.COALESCE)
            with contextlib.suppress(queue.Empty):
                while len(batch) < self.BATCH_MAX:
                    batch.append(self._queue.get_nowait())
            while True:
                try:
                    stop = self._commit(conn, batch)
                    break
                except sqlite3.Error as exc:
                    # Keep the batch (the events stay in the logs' tails meanwhile) and try again,
                    # until the server stops: then say loudly what could not be written.
                    self.write_error = exc
                    if self._closed:
                        lost = sum(1 for entry in batch if isinstance(entry, StoredEvent))
                        log.error("cannot write events to %s: %s; %d events not saved", self.path, exc, lost)
                        stop = any(entry == (_STOP,) for entry in batch if isinstance(entry, tuple))
                        for entry in batch:
                            if isinstance(entry, tuple) and entry[0] == _BARRIER:
                                entry[1].set()
                        break
                    log.error("cannot write events to %s: %s; retrying", self.path, exc)
                    time.sleep(self.RETRY_DELAY)
            self.write_error = None
            uncheckpointed += len(batch)
            if uncheckpointed >= self.CHECKPOINT_MAX:
                uncheckpointed = self._checkpoint(conn)
        self._checkpoint(conn)
        conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> int:
        """Copy the WAL into the database file. Done when the writer is idle (or the WAL has grown
        large), not in the middle of a burst as SQLite's automatic checkpoint would."""
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("checkpoint of %s failed: %s", self.path, exc)
        return 0

    def _commit(self, conn: sqlite3.Connection, batch: list[Any]) -> bool:
        keys = self._keys
        events: list[StoredEvent] = []
        barriers: list[threading.Event] = []
        marks: dict[str, int] = {}  # session -> last sequence committed by this transaction
        stop = False
        conn.execute("BEGIN")
        try:
            for entry in batch:
                if type(entry) is StoredEvent:
                    events.append(entry)
                    continue
                kind = entry[0]
                if kind == _SESSION:
                    # A session row comes before its first event in the queue; write in that order.
                    self._insert(conn, keys, events, marks)
                    events = []
                    _, key, session_id, record = entry
                    conn.execute("INSERT OR IGNORE INTO sessions (key, id) VALUES (?, ?)", (key, session_id))
                    if record is not None:
                        conn.execute("UPDATE sessions SET record = ? WHERE key = ?", (record, key))
                elif kind == _BARRIER:
                    barriers.append(entry[1])
                else:
                    stop = True
            self._insert(conn, keys, events, marks)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._flushed.update(marks)
        with self._progress:
            self._written += sum(1 for entry in batch if type(entry) is StoredEvent)
            self._progress.notify_all()
        for barrier in barriers:
            barrier.set()
        return stop

    @staticmethod
    def _insert(
        conn: sqlite3.Connection, keys: dict[str, int], events: list[StoredEvent], marks: dict[str, int]
    ) -> None:
        if not events:
            return
        # Many rows per statement: sqlite3 lets go of the GIL around every statement step, and
        # while the event loop is busy each handover back costs up to a switch interval (5 ms).
        # executemany() would pay that per event; this pays it per ROWS_PER_INSERT events.
        size = SqliteEventStore.ROWS_PER_INSERT
        for start in range(0, len(events), size):
            chunk = events[start : start + size]
            params = [value for e in chunk for value in (keys[e.session_id], e.sequence, e.type, e.json, e.raw_json)]
            conn.execute(_insert_sql(len(chunk)), params)
        counts: dict[str, int] = {}
        last: dict[str, StoredEvent] = {}
        for e in events:
            counts[e.session_id] = counts.get(e.session_id, 0) + 1
            last[e.session_id] = e
        conn.executemany(
            "UPDATE sessions SET event_count = event_count + ?, last_sequence = max(last_sequence, ?),"
            " updated_ns = max(updated_ns, ?) WHERE key = ?",
            [(counts[sid], e.sequence, e.time_ns, keys[sid]) for sid, e in last.items()],
        )
        for sid, e in last.items():
            marks[sid] = e.sequence

    # ---- reading -----------------------------------------------------------------------------
    def flushed_sequence(self, session_id: str) -> int:
        return self._flushed.get(session_id, 0)

    def stats(self, session_id: str) -> LogStats:
        return self._stats.get(session_id) or LogStats()

    def load_sessions(self) -> list[dict[str, Any]]:
        return list(self._records)

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            conn.execute("PRAGMA query_only=1")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
        return conn

    def read(self, session_id: str, after: int, limit: int | None, before: int | None = None) -> list[StoredEvent]:
        key = self._keys.get(session_id)
        if key is None:
            return []
        rows = self._reader().execute(
            "SELECT sequence, type, json, raw FROM events WHERE session_key = ? AND sequence > ? AND sequence < ?"
            " ORDER BY sequence LIMIT ?",
            (key, after, before if before is not None else 2**62, limit if limit is not None else -1),
        )
        return [StoredEvent(session_id, seq, event_type, body, raw) for seq, event_type, body, raw in rows]

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_pool, self.read, session_id, after, limit, before)
