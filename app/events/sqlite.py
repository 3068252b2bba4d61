"""The durable event store: SQLite (stdlib ``sqlite3``) in the data dir, written by one thread.

``append`` only queues the event; a writer thread commits whatever has queued up in one transaction
(group commit; WAL, ``synchronous=NORMAL``: a commit costs no fsync, and a crash of the bridge loses
nothing that was committed), then tells the sessions' logs on the event loop, which only then show
the events to readers. ``close`` commits everything still queued.

The writer never dies: a batch the disk refuses (full, I/O error, read-only) is kept and tried
again, and the logs are told the store is unavailable (they show new events from memory until it
recovers; the backlog is bounded by bytes); an event that cannot be stored as it is (text SQLite
cannot encode) is stored cleaned or as a stand-in, and its session is told; anything else that
escapes restarts the loop, keeping the batch.

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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.events.envelope import dumps, pack, stored_time, unpack

from .store import LogStats, StoreListener
from .stored import StoredEvent
from .text import clean_text, escape_surrogates

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
# The sessions' counter columns are no longer kept up to date (a batch is one INSERT, so the writer
# waits for the interpreter lock once per batch): a log is gap-free, so its first and last events,
# found through the primary key at start, give its count.


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    return "INSERT INTO events VALUES " + ",".join(["(?,?,?,?,?)"] * rows)


class StoreError(RuntimeError):
    """The data dir cannot be used (locked by another server, not writable, not a database)."""


# Queue entries: a StoredEvent, or one of these tuples.
_SESSION = 1  # (_SESSION, key, session_id, record_json or None)
_BARRIER = 2  # (_BARRIER, threading.Event): set once everything queued before it is committed
_STOP = 3
_DELETE = 4  # (_DELETE, key): the session and its events go


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


def storage_cause(exc: BaseException) -> str | None:
    """What makes ``exc`` a storage failure (to wait out), or None (a problem of the data)."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
        exc, sqlite3.IntegrityError | sqlite3.ProgrammingError | sqlite3.InterfaceError | sqlite3.DataError
    ):
        name = getattr(exc, "sqlite_errorname", "") or ""
        for prefix, what in _STORAGE_CODES.items():
            if name.startswith(prefix):
                return f"{what} ({exc})"
        return str(exc)
    return None


class SqliteEventStore:
    FILENAME = "events.sqlite3"
    synchronous = False
    # Most entries one transaction takes; a larger backlog is committed in several.
    BATCH_MAX = 32_768
    ROWS_PER_INSERT = 6000  # 5 parameters each: SQLite allows 32,766 per statement
    # Bytes of events waiting for the disk beyond which append refuses new ones (a disk that
    # cannot write, a writer that cannot keep up): the memory they hold is bounded.
    BACKLOG_BYTES = 256 * 1024 * 1024
    # Waits between tries of a batch the disk refused: from the first to the last, doubling.
    RETRY_DELAYS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0)
    # Seconds the writer waits after the first queued entry before it commits (0: none; tests).
    COALESCE = 0.0
    # After a batch this large, the writer waits this long for the next one to gather.
    BURST_BATCH = 64
    BURST_GATHER = 0.005
    GATHER_STEP = 0.001  # ... looking this often whether it still grows
    # An event larger than this (bytes, StoredEvent.size: a long message's item.completed holds
    # its text and every chunk's message) starts a transaction of its own.
    LARGE_EVENT = 256 * 1024
    # Checkpoint after this long without writes (between bursts: a checkpoint in one holds its
    # commits back, by tenths of a second for a few bursts' WAL on a busy disk), or, when writes never
    # pause that long, after this many transactions (each adds a 16 KiB page or more to the WAL)
    # or bytes of events, whatever happens.
    CHECKPOINT_IDLE = 0.1
    CHECKPOINT_MAX = 250
    CHECKPOINT_BYTES = 64 * 1024 * 1024

    def __init__(self, directory: Path, *, backlog_bytes: int | None = None) -> None:
        self.directory = directory
        self.path = directory / self.FILENAME
        self.backlog_bytes = backlog_bytes or self.BACKLOG_BYTES
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._keys: dict[str, int] = {}
        self._next_key = 1
        self._flushed: dict[str, int] = {}  # written by the writer thread only
        self._stats: dict[str, LogStats] = {}
        self._records: list[dict[str, Any]] = []
        self._queued_bytes = 0  # event loop thread only
        self._written_bytes = 0  # writer thread only
        self._writer: threading.Thread | None = None
        self._carry: list[Any] = []  # the batch being written: kept across a writer restart
        self._rest: list[Any] = []  # ... and what is taken already to be written after it
        self._wakeup = threading.Event()  # ends the writer's waits (close)
        self._reader_pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._lock_fd: int | None = None
        self._closed = False
        self.write_error: BaseException | None = None
        self._unavailable: str | None = None
        # Notices from the writer to the logs, delivered on the event loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: dict[str, StoreListener] = {}
        self._notice_lock = threading.Lock()
        self._failure_log = _FailureLog()
        self._notice_scheduled = False
        self._notice_marks: dict[str, int] = {}
        self._notice_failures: list[tuple[str, int, str]] = []
        self._notice_state = False
        # Counted for the server's metrics: events taken, and a call per committed batch
        # (its event count and when its oldest event was appended), on the writer thread.
        self.appended_events = 0
        self.commit_observer: Callable[[int, int], None] | None = None

    @property
    def pending_bytes(self) -> int:
        """Bytes of events taken and not yet committed."""
        return max(self._queued_bytes - self._written_bytes, 0)

    @property
    def unavailable(self) -> str | None:
        """Why events cannot be written now (the disk's error), or None."""
        return self._unavailable

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
        self._writer = threading.Thread(target=self._supervise, args=(conn,), name="event-writer", daemon=True)
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
        # Statement journals of a multi-statement transaction in memory, not in a temporary file
        # created and unlinked per commit.
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    def _load(self, conn: sqlite3.Connection) -> None:
        # A session whose create did not complete left a row without a record: it never existed.
        conn.execute("BEGIN")
        conn.execute("DELETE FROM events WHERE session_key IN (SELECT key FROM sessions WHERE record IS NULL)")
        conn.execute("DELETE FROM sessions WHERE record IS NULL")
        conn.execute("COMMIT")
        rows = conn.execute("SELECT key, id, record, updated_ns FROM sessions ORDER BY key").fetchall()
        for key, session_id, record, updated in rows:
            stats = _log_stats(conn, key, updated)
            self._keys[session_id] = key
            self._flushed[session_id] = stats.last_sequence
            self._stats[session_id] = stats
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
            self._wakeup.set()
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

    def append(self, event: StoredEvent) -> bool:
        if self._queued_bytes - self._written_bytes > self.backlog_bytes:
            return False  # never wait here: this is the event loop
        if self._loop is None:
            self._loop = asyncio._get_running_loop()
        if event.session_id not in self._keys:
            self._key(event.session_id)
        self._queue.put(event)
        self._queued_bytes += event.size
        self.appended_events += 1
        return True

    def attach(self, session_id: str, listener: StoreListener) -> None:
        self._listeners[session_id] = listener
        # Notices go to the loop the logs live on (the newest one, should a process run several).
        self._loop = asyncio._get_running_loop() or self._loop

    def forget(self, session_id: str) -> None:
        self._listeners.pop(session_id, None)

    def save_session(self, session_id: str, record: dict[str, Any]) -> None:
        key = self._key(session_id)
        # ASCII JSON: a lone surrogate in a title or path stays an escape, never a write error.
        self._queue.put((_SESSION, key, session_id, json.dumps(record, separators=(",", ":"))))

    def delete_session(self, session_id: str) -> None:
        """Remove the session and its events from the store (retention)."""
        key = self._keys.pop(session_id, None)
        self._stats.pop(session_id, None)
        # Its events were committed long ago: nothing of it is in flight that could add it back.
        self._flushed.pop(session_id, None)
        self._listeners.pop(session_id, None)
        self._records = [r for r in self._records if _record_id(r) != session_id]
        if key is not None:
            self._queue.put((_DELETE, key))

    def sync(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed (tests, shutdown)."""
        done = threading.Event()
        self._queue.put((_BARRIER, done))
        return done.wait(timeout)

    # ---- notices to the logs (delivered on the event loop) -------------------------------------
    def _notify(self, marks: dict[str, int] | None = None, failure: tuple[str, int, str] | None = None) -> None:
        loop = self._loop
        with self._notice_lock:
            if marks:
                self._notice_marks.update(marks)
            if failure is not None:
                self._notice_failures.append(failure)
            if marks is None and failure is None:
                self._notice_state = True
            if self._notice_scheduled or loop is None:
                return
            self._notice_scheduled = True
        try:
            loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            with self._notice_lock:
                self._notice_scheduled = False

    def _deliver(self) -> None:
        with self._notice_lock:
            marks, self._notice_marks = self._notice_marks, {}
            failures, self._notice_failures = self._notice_failures, []
            state, self._notice_state = self._notice_state, False
            self._notice_scheduled = False
        listeners = self._listeners
        for session_id, sequence in marks.items():
            listener = listeners.get(session_id)
            if listener is not None:
                self._tell(session_id, listener.committed, sequence)
        for session_id, sequence, message in failures:
            listener = listeners.get(session_id)
            if listener is not None:
                self._tell(session_id, listener.store_failed, sequence, message)
        if state:
            cause = self._unavailable
            for session_id, listener in list(listeners.items()):
                self._tell(session_id, listener.storage_changed, cause)

    @staticmethod
    def _tell(session_id: str, method: Any, *args: Any) -> None:
        try:
            method(*args)
        except Exception:
            log.exception("session %s: event log failed to take a store notice", session_id)

    def _set_unavailable(self, cause: str | None) -> None:
        if cause == self._unavailable:
            return
        if cause is None:
            log.warning("events are written to %s again", self.path)
        elif self._unavailable is None:
            log.error("cannot write events to %s: %s; keeping them in memory and retrying", self.path, cause)
        self._unavailable = cause
        self._notify()

    # ---- the writer thread -----------------------------------------------------------------------
    def _supervise(self, conn: sqlite3.Connection) -> None:
        """Run the write loop; whatever escapes it is logged and the loop starts again (the batch
        it was writing is kept in ``_carry``), so persistence never stops while the server runs."""
        restarts = 0
        while True:
            try:
                self._write_loop(conn)
                break
            except BaseException:
                log.exception("event writer failed; restarting it")
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                self._wakeup.wait(self.RETRY_DELAYS[min(restarts, len(self.RETRY_DELAYS) - 1)])
                restarts += 1
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    def _write_loop(self, conn: sqlite3.Connection) -> None:
        uncheckpointed = 0
        unchecked_bytes = 0
        failures = 0
        last_batch = 0
        batch = self._carry
        while True:
            if not batch:
                try:
                    batch.append(self._queue.get(timeout=self.CHECKPOINT_IDLE if uncheckpointed else None))
                except queue.Empty:
                    uncheckpointed = unchecked_bytes = self._checkpoint(conn)
                    continue
                if self.COALESCE:  # hold the writer back (tests); close() ends the wait
                    self._wakeup.wait(self.COALESCE)
                elif last_batch >= self.BURST_BATCH:
                    self._gather()
            rest: list[Any] = []
            with contextlib.suppress(queue.Empty):
                while len(batch) < self.BATCH_MAX:
                    entry = self._queue.get_nowait()
                    if type(entry) is StoredEvent and entry.size > self.LARGE_EVENT and batch:
                        # Committed after the events before it, on its own (with what follows):
                        # writing megabytes would hold back the rest of a stream it ends.
                        rest.append(entry)
                        break
                    batch.append(entry)
            last_batch = len(batch)
            self._carry = batch + rest if rest else batch
            self._rest = rest
            written = self._written_bytes
            try:
                stop = self._commit(conn, batch)
            except BaseException as exc:
                batch = self._carry  # (one batch again, in order)
                self._rest = []
                cause = storage_cause(exc)
                if cause is None:
                    # Something in the data: write the batch entry by entry, so only the event
                    # that cannot be stored is affected.
                    stop = self._commit_each(conn, batch)
                elif self._closed:
                    self._set_unavailable(cause)
                    stop = self._give_up(batch, cause)
                else:
                    # Keep the batch (its events stay in the logs' tails) and try again.
                    self.write_error = exc
                    self._set_unavailable(cause)
                    self._wakeup.wait(self.RETRY_DELAYS[min(failures, len(self.RETRY_DELAYS) - 1)])
                    failures += 1
                    continue
            batch = self._carry  # what comes after a large event ([] else)
            failures = 0
            if self._unavailable is not None and not stop:
                self.write_error = None
                self._set_unavailable(None)
            uncheckpointed += 1
            unchecked_bytes += self._written_bytes - written
            if uncheckpointed >= self.CHECKPOINT_MAX or unchecked_bytes >= self.CHECKPOINT_BYTES:
                uncheckpointed = unchecked_bytes = self._checkpoint(conn)
            if stop:
                self._checkpoint(conn)
                return

    def _gather(self) -> None:
        """A burst is on: let the next batch gather, so a commit costs a few handovers of the
        interpreter lock for many events (a lone event is committed at once); but only while it
        grows: once events stop coming (the burst ended, the event loop turned to other work),
        what is there is committed at once, as readers wait for it."""
        deadline = time.monotonic() + self.BURST_GATHER
        size = self._queue.qsize()
        while (remaining := deadline - time.monotonic()) > 0:
            if self._wakeup.wait(min(self.GATHER_STEP, remaining)):
                return  # close()
            grown = self._queue.qsize()
            if grown == size:
                return
            size = grown

    def _give_up(self, batch: list[Any], cause: str) -> bool:
        """The server stops and the disk still refuses: say loudly what could not be written."""
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(self._queue.get_nowait())
        lost = sum(1 for entry in batch if type(entry) is StoredEvent)
        log.error("cannot write events to %s: %s; %d events not saved", self.path, cause, lost)
        for entry in batch:
            if type(entry) is tuple and entry[0] == _BARRIER:
                entry[1].set()
        return True

    def _checkpoint(self, conn: sqlite3.Connection) -> int:
        """Copy the WAL into the database file. Done when the writer is idle (or the WAL has grown
        large), not in the middle of a burst as SQLite's automatic checkpoint would."""
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("checkpoint of %s failed: %s", self.path, exc)
        return 0

    def _commit(self, conn: sqlite3.Connection, batch: list[Any]) -> bool:
        marks: dict[str, int] = {}  # session -> last sequence committed by this transaction
        if len(batch) <= self.ROWS_PER_INSERT and all(type(entry) is StoredEvent for entry in batch):
            # The common case: one statement, its own transaction.
            self._insert(conn, self._keys, batch, marks)
            self._committed(batch, marks, [])
            return False
        keys = self._keys
        events: list[StoredEvent] = []
        barriers: list[threading.Event] = []
        stop = False
        conn.execute("BEGIN")
        try:
            for entry in batch:
                if type(entry) is StoredEvent:
                    events.append(entry)
                    continue
                kind = entry[0]
                if kind == _SESSION or kind == _DELETE:
                    # A session row comes before its first event in the queue; write in that order.
                    self._insert(conn, keys, events, marks)
                    events = []
                    self._session_entry(conn, entry)
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
        self._committed(batch, marks, barriers)
        return stop

    @staticmethod
    def _session_entry(conn: sqlite3.Connection, entry: tuple[Any, ...]) -> None:
        if entry[0] == _DELETE:
            conn.execute("DELETE FROM events WHERE session_key = ?", (entry[1],))
            conn.execute("DELETE FROM sessions WHERE key = ?", (entry[1],))
            return
        _, key, session_id, record = entry
        conn.execute("INSERT OR IGNORE INTO sessions (key, id) VALUES (?, ?)", (key, session_id))
        if record is not None:
            conn.execute("UPDATE sessions SET record = ? WHERE key = ?", (record, key))

    def _committed(self, batch: list[Any], marks: dict[str, int], barriers: list[threading.Event]) -> None:
        self._carry, self._rest = self._rest, []  # committed: a restarted loop must not write it again
        self._flushed.update(marks)
        self._written_bytes += sum(entry.size for entry in batch if type(entry) is StoredEvent)
        observer = self.commit_observer
        if observer is not None:
            events = [entry for entry in batch if type(entry) is StoredEvent]
            if events:
                observer(len(events), events[0].time_ns)
        if marks:
            self._notify(marks)
        for barrier in barriers:
            barrier.set()

    def _commit_each(self, conn: sqlite3.Connection, batch: list[Any]) -> bool:
        """One transaction, entry by entry: an event that cannot be stored as it is gets its text
        cleaned (lone surrogates), else a stand-in ``error`` event with its sequence. Each session
        with such an event is told once for the batch, and the batch is logged in one line (at
        most one per ``FAILURE_LOG_INTERVAL``). A storage failure still raises (the caller keeps
        the batch)."""
        keys = self._keys
        marks: dict[str, int] = {}
        barriers: list[threading.Event] = []
        failed = _BatchFailures()
        stop = False
        conn.execute("BEGIN")
        try:
            for entry in batch:
                if type(entry) is StoredEvent:
                    self._insert_guarded(conn, keys, entry, marks, failed)
                    continue
                kind = entry[0]
                if kind == _BARRIER:
                    barriers.append(entry[1])
                elif kind == _STOP:
                    stop = True
                else:
                    conn.execute("SAVEPOINT entry")
                    try:
                        self._session_entry(conn, entry)
                    except Exception as exc:
                        if storage_cause(exc) is not None:
                            raise
                        conn.execute("ROLLBACK TO entry")
                        failed.add(str(entry[2]) if entry[0] == _SESSION else "", 0, "session record", exc)
                    conn.execute("RELEASE entry")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        for session_id, (sequence, message) in failed.first.items():
            if sequence:
                self._notify(failure=(session_id, sequence, message))
        self._failure_log.report(failed)
        self._committed(batch, marks, barriers)
        return stop

    def _insert_guarded(
        self,
        conn: sqlite3.Connection,
        keys: dict[str, int],
        event: StoredEvent,
        marks: dict[str, int],
        failed: _BatchFailures,
    ) -> None:
        for attempt in range(3):
            conn.execute("SAVEPOINT entry")
            try:
                self._insert(conn, keys, [event], marks)
                conn.execute("RELEASE entry")
                if attempt:
                    failed.kept(attempt)
                return
            except Exception as exc:
                if storage_cause(exc) is not None:
                    raise
                conn.execute("ROLLBACK TO entry")
                conn.execute("RELEASE entry")
                if attempt == 0:
                    failed.add(event.session_id, event.sequence, event.type, exc)
                    # Text SQLite cannot encode. Nobody has seen the event yet: it can still change.
                    raw = event.raw_json
                    event.replace_text(clean_text(event.json), None if raw is None else escape_surrogates(raw))
                elif attempt == 1:
                    event.replace_text(_stand_in(event, f"{type(exc).__name__}: {exc}"), None, "error")
        failed.kept(3)  # not in the store: the log goes on past it (no gap is waited for)
        marks[event.session_id] = max(marks.get(event.session_id, 0), event.sequence)

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
            # Stored without what the row and the session say (``envelope.pack``).
            chunk = [e for e in chunk if e.session_id in keys]  # not one of a session deleted since
            if not chunk:
                continue
            params = [
                v
                for e in chunk
                for v in (
                    keys[e.session_id],
                    e.sequence,
                    e.type,
                    *pack(e.session_id, e.sequence, e.type, e.json, e.raw_json),
                )
            ]
            conn.execute(_insert_sql(len(chunk)), params)
        for e in events:
            marks[e.session_id] = e.sequence

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
        return [
            StoredEvent(session_id, seq, event_type, *unpack(session_id, seq, event_type, body, raw))
            for seq, event_type, body, raw in rows
        ]

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_pool, self.read, session_id, after, limit, before)


class _BatchFailures:
    """What of one batch could not be stored as it was."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[int, str]] = {}  # session -> its first failed event, why
        self.count = 0
        self.cleaned = self.stand_ins = self.lost = 0
        self.example: tuple[str, int, str, BaseException] | None = None

    def add(self, session_id: str, sequence: int, what: str, exc: BaseException) -> None:
        self.count += 1
        message = f"{type(exc).__name__}: {exc}"
        self.first.setdefault(session_id, (sequence, message))
        if self.example is None:
            self.example = (session_id, sequence, what, exc)

    def kept(self, attempt: int) -> None:
        """The failed event was stored cleaned (1), as a stand-in (2), or not at all (3)."""
        if attempt == 1:
            self.cleaned += 1
        elif attempt == 2:
            self.stand_ins += 1
        else:
            self.lost += 1


class _FailureLog:
    """One log line per failed batch, at most one per ``interval`` seconds (the traceback of the
    first failure with it); batches in between are counted into the next line."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._last = float("-inf")
        self._skipped_batches = 0
        self._skipped_events = 0

    def report(self, failed: _BatchFailures) -> None:
        if failed.example is None:
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            self._skipped_batches += 1
            self._skipped_events += failed.count
            return
        self._last = now
        session_id, sequence, what, exc = failed.example
        since = ""
        if self._skipped_batches:
            since = f" (and {self._skipped_events} events in {self._skipped_batches} batches since the last line)"
            self._skipped_batches = self._skipped_events = 0
        sessions = ", ".join(sorted(s[:64] for s in failed.first)[:5])
        log.error(
            "%d entries of sessions %s could not be stored as they were (%d cleaned, %d stand-ins, %d not stored)%s; "
            "first: session %.64s, event %d (%s): %s",
            failed.count,
            sessions,
            failed.cleaned,
            failed.stand_ins,
            failed.lost,
            since,
            session_id,
            sequence,
            what,
            exc,
            exc_info=exc,
        )


def _log_stats(conn: sqlite3.Connection, key: int, updated_ns: int) -> LogStats:
    """Count, last sequence and time of the session's stored events (two primary-key lookups)."""
    row = conn.execute(
        "SELECT sequence, json FROM events WHERE session_key = ? ORDER BY sequence DESC LIMIT 1", (key,)
    ).fetchone()
    if row is None:
        return LogStats(0, 0, updated_ns)
    last, last_json = row
    (first,) = conn.execute("SELECT min(sequence) FROM events WHERE session_key = ?", (key,)).fetchone()
    return LogStats(last - first + 1, last, max(updated_ns, _event_ns(last_json)))


def _event_ns(event_json: str) -> int:
    """When the event was recorded (its envelope's ``time``), in ns since the epoch."""
    try:
        stamp = stored_time(event_json) or json.loads(event_json)["time"]  # 2026-01-30T10:15:42.123456789Z
        seconds = datetime.fromisoformat(stamp[:19]).replace(tzinfo=UTC).timestamp()
        fraction = stamp[20:-1] if stamp[19:20] == "." else ""
        return int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9] or 0)
    except (ValueError, KeyError, TypeError):
        return 0


def _record_id(record: dict[str, Any]) -> Any:
    info = record.get("info")
    return info.get("sessionId") if isinstance(info, dict) else None


def _stand_in(event: StoredEvent, message: str) -> str:
    """An ``error`` envelope in place of an event that cannot be stored (same sequence, so the
    log has no gap)."""
    try:
        envelope = json.loads(clean_text(event.json))
    except ValueError:
        envelope = {"sequence": event.sequence, "session_id": event.session_id}
    envelope["type"] = "error"
    envelope["data"] = {
        "message": f"event {event.sequence} could not be stored: {message}",
        "code": "storage_error",
        "details": {"type": event.type},
    }
    envelope["raw"] = None
    return dumps(envelope)
