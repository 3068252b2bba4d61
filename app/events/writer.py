"""The durable event store: one batch writer over a backend per database.

``BatchWriter`` is the ``EventStore`` the logs talk to, whatever the database; a ``StoreBackend``
(``SqliteBackend`` in ``sqlite.py``, ``PostgresBackend`` in ``postgres.py``) is the database under
it: its schema, its statements, its connections. The writer holds what both share:

- ``append`` only takes the event: what one pass of the event loop appends is committed together
  at the end of that pass (group commit), then the sessions' logs are told, and only then show the
  events to readers (durable before visible). A small batch of a backend that commits one in tens
  of microseconds (SQLite: a few rows, no network) is committed right there on the event loop when
  the writer thread is idle: no hand-off between threads on the path of a turn. Anything else (a
  burst's larger batches, session records, a busy or failing writer, PostgreSQL) goes to the
  writer thread, which commits whatever has queued up in one transaction and tells the logs on the
  event loop. One lock (``_busy``) keeps the two from ever writing at once, and a batch is committed
  on the loop only when nothing handed to the thread is still waiting, so the order holds.
  ``close`` commits everything still queued.
- The backlog of events waiting for the database is bounded by bytes (``backlog_bytes``): beyond
  it ``append`` refuses, and the log says how many it could not keep.
- The writer never dies: a batch the database refuses (disk full, I/O error, connection lost) is
  kept and tried again, and the logs are told the store is unavailable (they show new events from
  memory until it recovers); an event that cannot be stored as it is (text the database cannot
  encode) is stored cleaned or as a stand-in, its session told once per batch and the batch logged
  in one line at most every ten seconds, so a failure never feeds itself; anything else that escapes
  restarts the loop, keeping the batch.
- Retention: ``delete_session`` queues the session's removal behind its events.

Reads run on the backend's reader threads (``StoreBackend.executor``), so a long catch-up never
stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from .envelope import dumps
from .store import LogStats, StoreListener
from .stored import StoredEvent
from .text import clean_text, escape_surrogates

log = logging.getLogger("acp_rest_bridge.events")


@dataclass(slots=True)
class Stored:
    """What a database holds when the store opens."""

    # Every session, with the counters of its events (its log continues from there).
    sessions: dict[str, LogStats] = field(default_factory=dict)
    # The sessions' records, oldest first (a session whose create has not completed has none).
    records: list[dict[str, Any]] = field(default_factory=list)


class StoreBackend(Protocol):
    """One database under the batch writer. ``open`` and ``close`` run on the thread that opens and
    closes the store; the writing methods on the writer thread only, one at a time; ``read`` and
    ``read_stats`` on any thread (the event loop's, the reader threads of ``executor``)."""

    # How log lines and errors name the storage ("/data/events.sqlite3", "the database postgresql://...").
    where: str

    @property
    def executor(self) -> Executor:
        """The threads reads run on (made by ``open``)."""

    def open(self) -> Stored:
        """Acquire the storage, bring its schema to the current version (``StoreError`` when it cannot,
        or when the schema is newer than this bridge's), drop the sessions whose create never
        completed; what it holds."""

    def close(self) -> None:
        """Release the storage; the writer thread has stopped."""

    # ---- the writer thread ----------------------------------------------------------------------
    def write(self, events: list[StoredEvent]) -> dict[str, int]:
        """Commit the events in a transaction of their own (the common case: as few statements as the
        database allows); per session, the last sequence written."""

    def transaction(self) -> AbstractContextManager[None]:
        """A transaction around what the block writes: committed at its end, rolled back (never
        raising again) when the block raises."""

    def savepoint(self) -> AbstractContextManager[None]:
        """Inside a transaction: what the block writes is undone (and the transaction goes on) when
        the block raises (which it re-raises)."""

    def insert(self, events: list[StoredEvent]) -> dict[str, int]:
        """Inside a transaction: write the events; per session, the last sequence written."""

    def save_session(self, session_id: str, record: str | None) -> None:
        """Inside a transaction: make the session's row (kept as it is when ``record`` is None) or
        replace its record (JSON)."""

    def delete_session(self, session_id: str) -> None:
        """Inside a transaction: remove the session and its events."""

    def checkpoint(self) -> None:
        """The writer is idle (or has written much since the last call): housekeeping."""

    def storage_cause(self, exc: BaseException) -> str | None:
        """What makes ``exc`` a failure of the storage, to wait out (None: a problem of the data)."""

    # ---- the event loop (``inline_commits``), under the writer's lock ----------------------------------
    # True: a small batch of events commits in tens of microseconds without waiting on a network,
    # so ``write`` may run on the event loop while the writer thread is idle.
    inline_commits: bool

    # ---- any thread ------------------------------------------------------------------------------
    def read(self, session_id: str, after: int, limit: int | None, before: int | None) -> list[StoredEvent]:
        """Committed events with ``after < sequence < before``, oldest first, at most ``limit``."""

    def read_stats(self, session_id: str) -> LogStats:
        """The counters of the session's events as stored now (another bridge may have written them)."""


# Queue entries: a StoredEvent, or one of these tuples.
_SESSION = 1  # (_SESSION, session_id, record_json or None)
_BARRIER = 2  # (_BARRIER, threading.Event): set once everything queued before it is committed
_STOP = 3
_DELETE = 4  # (_DELETE, session_id): the session and its events go
_TICK = 5  # (_TICK,): commits were made on the event loop; the writer thread sees to the checkpoint
# (A list of these entries is what one pass of the event loop handed over, in order.)

B = TypeVar("B", bound=StoreBackend)


class BatchWriter(Generic[B]):
    """The event store over ``backend`` (see the module doc)."""

    synchronous = False
    # Most entries one transaction takes; a larger backlog is committed in several.
    BATCH_MAX = 32_768
    # Bytes of events waiting for the database beyond which append refuses new ones (a disk that
    # cannot write, a writer that cannot keep up): the memory they hold is bounded.
    BACKLOG_BYTES = 256 * 1024 * 1024
    # Waits between tries of a batch the database refused: from the first to the last, doubling.
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
    # The backend's checkpoint after this long without writes (between bursts: a checkpoint in one
    # holds its commits back, by tenths of a second for a few bursts' WAL on a busy disk), or, when
    # writes never pause that long, after this many transactions (each adds a 16 KiB page or more to
    # SQLite's WAL) or bytes of events, whatever happens.
    CHECKPOINT_IDLE = 0.1
    CHECKPOINT_MAX = 250
    CHECKPOINT_BYTES = 64 * 1024 * 1024
    # The largest batch committed on the event loop (when the backend allows it and the writer
    # thread is idle): entries and bytes of events. A larger one goes to the writer thread.
    INLINE_ENTRIES = 16
    INLINE_BYTES = 64 * 1024

    def __init__(self, backend: B, *, backlog_bytes: int | None = None) -> None:
        self.backend = backend
        self.backlog_bytes = backlog_bytes or self.BACKLOG_BYTES
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # What this pass of the event loop appended, committed or handed over at its end (``_flush``).
        self._pending: list[Any] = []
        self._flush_scheduled = False
        self._flush_loop: asyncio.AbstractEventLoop | None = None
        self._flush_thread = 0
        # Held while the connection writes: by the writer thread from taking a batch until it is
        # committed, by the event loop around a commit of its own.
        self._busy = threading.Lock()
        # Under _busy: transactions and bytes since the last checkpoint, when the last one committed.
        self._uncheckpointed = 0
        self._unchecked_bytes = 0
        self._last_write = 0.0
        # Items of events and session entries put in the queue (event loop thread; no loop: the caller's),
        # taken from it, and taken and committed (the writer thread): the loop commits a batch of its
        # own only when every item put is committed.
        self._handed = 0
        self._taken = 0
        self._finished = 0
        self._writer_sleeps = False  # the writer thread waits with no timeout (nothing to checkpoint)
        self._ticked = False  # ... and has been woken to count down to a checkpoint
        self.inline_commits = 0  # batches committed on the event loop (tests, benchmarks)
        self._known: set[str] = set()  # sessions whose row is stored or queued (event loop thread)
        self._flushed: dict[str, int] = {}  # written by the writer thread (and open, forget)
        self._stats: dict[str, LogStats] = {}
        self._records: list[dict[str, Any]] = []
        self._queued_bytes = 0  # event loop thread only
        self._written_bytes = 0  # writer thread only
        self._writer: threading.Thread | None = None
        self._carry: list[Any] = []  # the batch being written: kept across a writer restart
        self._rest: list[Any] = []  # ... and what is taken already to be written after it
        self._wakeup = threading.Event()  # ends the writer's waits (close)
        self._opened = False
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
        # While the writer thread holds ``_busy`` its notices wait, so that a log woken by one finds
        # the writer idle (and commits its next small batch itself).
        self._hold_notices = False
        self._notice_held = False
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
        """Why events cannot be written now (the database's error), or None."""
        return self._unavailable

    @property
    def writing(self) -> bool:
        """The writer thread runs."""
        return self._writer is not None and self._writer.is_alive()

    # ---- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        stored = self.backend.open()
        self._opened = True
        for session_id, stats in stored.sessions.items():
            self._known.add(session_id)
            self._flushed[session_id] = stats.last_sequence
            self._stats[session_id] = stats
        self._records = stored.records
        self._writer = threading.Thread(target=self._supervise, name="event-writer", daemon=True)
        self._writer.start()

    def close(self) -> None:
        """Commit everything queued, stop the writer, release the storage."""
        if self._closed or not self._opened:
            return
        self._closed = True
        self._handoff()
        if self._writer is not None:
            self._queue.put((_STOP,))
            self._wakeup.set()
            self._writer.join()
        self.backend.close()

    # ---- writing (event loop thread) -------------------------------------------------------------
    def append(self, event: StoredEvent) -> bool:
        if self._queued_bytes - self._written_bytes > self.backlog_bytes:
            return False  # never wait here: this is the event loop
        if event.session_id not in self._known:
            self._known.add(event.session_id)
            self._enqueue((_SESSION, event.session_id, None))  # before its first event
        if self._flush_scheduled:
            self._pending.append(event)  # (the common case of _enqueue, inline: once per event)
        else:
            self._enqueue(event)
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
        self._known.add(session_id)
        # ASCII JSON: a lone surrogate in a title or path stays an escape, never a write error.
        self._enqueue((_SESSION, session_id, json.dumps(record, separators=(",", ":"))))

    def delete_session(self, session_id: str) -> None:
        """Remove the session and its events from the store (retention)."""
        known = session_id in self._known
        self.forget_session(session_id)
        if known:
            self._enqueue((_DELETE, session_id))

    def forget_session(self, session_id: str) -> None:
        """Drop what this store knows of the session, writing nothing (another bridge deleted it;
        or ``delete_session``). Its id starts afresh."""
        self._known.discard(session_id)
        self._stats.pop(session_id, None)
        self._flushed.pop(session_id, None)
        self._listeners.pop(session_id, None)
        self._records = [r for r in self._records if _record_id(r) != session_id]

    def remember(self, session_id: str, stats: LogStats) -> None:
        """The session's events as stored now (written by another bridge, which ran it): its log
        continues from there."""
        self._known.add(session_id)
        self._flushed[session_id] = max(self._flushed.get(session_id, 0), stats.last_sequence)
        self._stats[session_id] = stats

    async def refresh_stats(self, session_id: str) -> LogStats:
        """``remember`` what the database holds of the session now."""
        stats = await asyncio.get_running_loop().run_in_executor(
            self.backend.executor, self.backend.read_stats, session_id
        )
        self.remember(session_id, stats)
        return stats

    def sync(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed (tests, shutdown)."""
        done = threading.Event()
        loop = self._flush_loop
        if (
            self._flush_scheduled
            and loop is not None
            and threading.get_ident() != self._flush_thread
            and loop.is_running()
        ):
            # The loop's pending entries first: its flush, then this barrier, in the loop's order.
            loop.call_soon_threadsafe(self._barrier, done)
        else:
            self._barrier(done)
        return done.wait(timeout)

    def _barrier(self, done: threading.Event) -> None:
        self._handoff()
        self._queue.put((_BARRIER, done))

    # ---- committing what a pass of the event loop appended -------------------------------------
    def _enqueue(self, entry: Any) -> None:
        """Queue ``entry`` after everything before it: for the end of this pass of the event loop
        (``_flush``), or for the writer thread directly where no loop runs (tests, tools)."""
        if self._flush_scheduled:
            self._pending.append(entry)
            return
        loop = asyncio._get_running_loop()
        if loop is None:
            self._handed += 1
            self._queue.put(entry)
            return
        # Notices go to the loop the logs live on.
        self._loop = loop
        self._flush_scheduled = True
        self._flush_loop = loop
        self._flush_thread = threading.get_ident()
        self._pending.append(entry)
        loop.call_soon(self._flush)

    def _handoff(self) -> None:
        """What waits for the end of the loop's pass goes to the writer thread now."""
        self._flush_scheduled = False
        if self._pending:
            batch, self._pending = self._pending, []
            self._handed += 1
            self._queue.put(batch)

    def _flush(self) -> None:
        """The end of a pass of the event loop: commit what it appended here when that is small,
        the backend allows it and the writer thread has nothing in hand; else hand it over."""
        self._flush_scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        if (
            self.backend.inline_commits
            and len(batch) <= self.INLINE_ENTRIES
            and not self.COALESCE
            and self._unavailable is None
            and not self._closed
            and 0 <= (size := events_size(batch)) <= self.INLINE_BYTES
            and self._busy.acquire(blocking=False)
        ):
            try:
                # Nothing handed to the writer thread may be committed after this batch.
                if self._finished == self._handed and self._commit_inline(batch, size):
                    return
            finally:
                self._busy.release()
        self._handed += 1
        self._queue.put(batch)

    def _commit_inline(self, batch: list[StoredEvent], size: int) -> bool:
        """Commit on the event loop (``_busy`` held); False leaves the batch to the writer thread,
        which retries it and says what failed."""
        try:
            marks = self.backend.write(batch)
        except Exception:
            return False
        self.inline_commits += 1
        self._flushed.update(marks)
        self._written_bytes += size
        self._uncheckpointed += 1
        self._unchecked_bytes += size
        self._last_write = time.monotonic()
        observer = self.commit_observer
        if observer is not None:
            observer(len(batch), batch[0].time_ns)
        if not self._ticked and (self._writer_sleeps or self._checkpoint_due()):
            # Wake the writer thread once, to checkpoint when the writes pause (or now, past the bounds).
            self._ticked = True
            self._queue.put((_TICK,))
        listeners = self._listeners
        for session_id, sequence in marks.items():
            listener = listeners.get(session_id)
            if listener is not None:
                self._tell(session_id, listener.committed, sequence)
        return True

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
            if self._hold_notices:
                self._notice_held = True  # sent once the writer thread lets go of the connection
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
            log.warning("events are written to %s again", self.backend.where)
        elif self._unavailable is None:
            log.error("cannot write events to %s: %s; keeping them in memory and retrying", self.backend.where, cause)
        self._unavailable = cause
        self._notify()

    # ---- the writer thread -----------------------------------------------------------------------
    def _supervise(self) -> None:
        """Run the write loop; whatever escapes it is logged and the loop starts again (the batch
        it was writing is kept in ``_carry``), so persistence never stops while the server runs."""
        restarts = 0
        while True:
            try:
                self._write_loop()
                return
            except BaseException:
                log.exception("event writer failed; restarting it")
                self._wakeup.wait(self.RETRY_DELAYS[min(restarts, len(self.RETRY_DELAYS) - 1)])
                restarts += 1

    def _storage_cause(self, exc: BaseException) -> str | None:
        if isinstance(exc, OSError):
            return exc.strerror or str(exc)
        return self.backend.storage_cause(exc)

    def _write_loop(self) -> None:
        failures = 0
        last_batch = 0
        retry_in = 0.0
        batch = self._carry
        while True:
            if retry_in:
                # (holding nothing: the logs hear that the storage fails; close() ends the wait)
                self._wakeup.wait(retry_in)
                retry_in = 0.0
            rest: list[Any] = []
            if not batch:
                # Wait for work, holding nothing: meanwhile the event loop may commit on its own.
                item = self._next(self.CHECKPOINT_IDLE if self._uncheckpointed else None)
                if item is None:
                    continue
                self._take(item, batch, rest)
                if not batch:
                    continue
            with self._holding():
                if not rest:
                    if self.COALESCE:  # hold the writer back (tests); close() ends the wait
                        self._wakeup.wait(self.COALESCE)
                    elif last_batch >= self.BURST_BATCH:
                        self._gather()
                    with contextlib.suppress(queue.Empty):
                        while len(batch) < self.BATCH_MAX and not rest:
                            self._take(self._queue.get_nowait(), batch, rest)
                last_batch = len(batch)
                self._carry = batch + rest if rest else batch
                self._rest = rest
                written = self._written_bytes
                try:
                    stop = self._commit(batch)
                except BaseException as exc:
                    batch = self._carry  # (one batch again, in order)
                    self._rest = []
                    cause = self._storage_cause(exc)
                    if cause is None:
                        # Something in the data: write the batch entry by entry, so only the event
                        # that cannot be stored is affected.
                        stop = self._commit_each(batch)
                    elif self._closed:
                        self._set_unavailable(cause)
                        stop = self._give_up(batch, cause)
                    else:
                        # Keep the batch (its events stay in the logs' tails) and try again.
                        self.write_error = exc
                        self._set_unavailable(cause)
                        retry_in = self.RETRY_DELAYS[min(failures, len(self.RETRY_DELAYS) - 1)]
                        failures += 1
                        continue
                batch = self._carry  # what comes after a large event ([] else)
                failures = 0
                if self._unavailable is not None and not stop:
                    self.write_error = None
                    self._set_unavailable(None)
                self._uncheckpointed += 1
                self._unchecked_bytes += self._written_bytes - written
                self._last_write = time.monotonic()
                if stop or self._checkpoint_due():
                    self._checkpoint()
                if stop:
                    return

    @contextlib.contextmanager
    def _holding(self) -> Iterator[None]:
        """The writer thread's hold of the connection; the notices it made meanwhile go out after."""
        with self._busy:
            self._hold_notices = True
            try:
                yield
            finally:
                self._hold_notices = False
        with self._notice_lock:
            held, self._notice_held = self._notice_held, False
        if held:
            self._notify({})

    def _next(self, timeout: float | None) -> Any:
        """The next queued item; None once it is time for a checkpoint (which it made) or after a tick."""
        self._writer_sleeps = timeout is None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            item = None
        finally:
            self._writer_sleeps = False
        if type(item) is tuple and item[0] == _TICK:
            self._ticked = False
            item = None
        if item is None and self._uncheckpointed:
            with self._busy:
                # After CHECKPOINT_IDLE without writes (the event loop's commits count), or past the bounds.
                if time.monotonic() - self._last_write >= self.CHECKPOINT_IDLE or self._checkpoint_due():
                    self._checkpoint()
        return item

    def _checkpoint_due(self) -> bool:
        return self._uncheckpointed >= self.CHECKPOINT_MAX or self._unchecked_bytes >= self.CHECKPOINT_BYTES

    def _checkpoint(self) -> None:
        self.backend.checkpoint()
        self._uncheckpointed = self._unchecked_bytes = 0

    def _take(self, item: Any, batch: list[Any], rest: list[Any]) -> None:
        """Add a queued item (an entry, or a list of them from one pass of the event loop) to
        ``batch``; from an event larger than ``LARGE_EVENT`` on (not first in the batch), to ``rest``."""
        if type(item) is list or type(item) is StoredEvent or item[0] in (_SESSION, _DELETE):
            self._taken += 1
        entries = item if type(item) is list else (item,)
        for index, entry in enumerate(entries):
            if type(entry) is StoredEvent:
                if entry.size > self.LARGE_EVENT and batch:
                    # Committed after the events before it, on its own (with what follows):
                    # writing megabytes would hold back the rest of a stream it ends.
                    rest.extend(entries[index:])
                    return
            elif entry[0] == _TICK:
                self._ticked = False
                continue
            batch.append(entry)

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
        """The server stops and the database still refuses: say loudly what could not be written."""
        rest: list[Any] = []
        with contextlib.suppress(queue.Empty):
            while True:
                self._take(self._queue.get_nowait(), batch, rest)
                batch.extend(rest)
                rest.clear()
        lost = sum(1 for entry in batch if type(entry) is StoredEvent)
        log.error("cannot write events to %s: %s; %d events not saved", self.backend.where, cause, lost)
        for entry in batch:
            if type(entry) is tuple and entry[0] == _BARRIER:
                entry[1].set()
        return True

    def _commit(self, batch: list[Any]) -> bool:
        backend = self.backend
        if events_size(batch) >= 0:
            # The common case: events only, in a transaction of their own.
            self._committed(batch, backend.write(batch), [])
            return False
        marks: dict[str, int] = {}  # session -> last sequence committed by this transaction
        events: list[StoredEvent] = []
        barriers: list[threading.Event] = []
        stop = False
        with backend.transaction():
            for entry in batch:
                if type(entry) is StoredEvent:
                    events.append(entry)
                    continue
                kind = entry[0]
                if kind == _SESSION or kind == _DELETE:
                    # A session row comes before its first event in the queue; write in that order.
                    if events:
                        marks.update(backend.insert(events))
                        events = []
                    self._session_entry(entry)
                elif kind == _BARRIER:
                    barriers.append(entry[1])
                else:
                    stop = True
            if events:
                marks.update(backend.insert(events))
        self._committed(batch, marks, barriers)
        return stop

    def _session_entry(self, entry: tuple[Any, ...]) -> None:
        if entry[0] == _DELETE:
            self.backend.delete_session(entry[1])
        else:
            self.backend.save_session(entry[1], entry[2])

    def _committed(self, batch: list[Any], marks: dict[str, int], barriers: list[threading.Event]) -> None:
        self._carry, self._rest = self._rest, []  # committed: a restarted loop must not write it again
        if not self._carry:
            self._finished = self._taken  # all the writer thread took is committed (before the notices)
        self._flushed.update(marks)
        events = 0
        first = None
        for entry in batch:  # (a loop, not generators: once per entry of every batch)
            if type(entry) is StoredEvent:
                self._written_bytes += entry.size
                events += 1
                if first is None:
                    first = entry
        observer = self.commit_observer
        if observer is not None and first is not None:
            observer(events, first.time_ns)
        if marks:
            self._notify(marks)
        for barrier in barriers:
            barrier.set()

    def _commit_each(self, batch: list[Any]) -> bool:
        """One transaction, entry by entry: an event that cannot be stored as it is gets its text
        cleaned (lone surrogates), else a stand-in ``error`` event with its sequence. Each session
        with such an event is told once for the batch, and the batch is logged in one line (at
        most one per ``_FailureLog.interval``). A storage failure still raises (the caller keeps
        the batch)."""
        backend = self.backend
        marks: dict[str, int] = {}
        barriers: list[threading.Event] = []
        failed = _BatchFailures()
        stop = False
        with backend.transaction():
            for entry in batch:
                if type(entry) is StoredEvent:
                    self._insert_guarded(entry, marks, failed)
                    continue
                kind = entry[0]
                if kind == _BARRIER:
                    barriers.append(entry[1])
                elif kind == _STOP:
                    stop = True
                else:
                    try:
                        with backend.savepoint():
                            self._session_entry(entry)
                    except Exception as exc:
                        if self._storage_cause(exc) is not None:
                            raise
                        failed.add(str(entry[1]) if entry[0] == _SESSION else "", 0, "session record", exc)
        for session_id, (sequence, message) in failed.first.items():
            if sequence:
                self._notify(failure=(session_id, sequence, message))
        self._failure_log.report(failed)
        self._committed(batch, marks, barriers)
        return stop

    def _insert_guarded(self, event: StoredEvent, marks: dict[str, int], failed: _BatchFailures) -> None:
        for attempt in range(3):
            try:
                with self.backend.savepoint():
                    marks.update(self.backend.insert([event]))
                if attempt:
                    failed.kept(attempt)
                return
            except Exception as exc:
                if self._storage_cause(exc) is not None:
                    raise
                if attempt == 0:
                    failed.add(event.session_id, event.sequence, event.type, exc)
                    # Text the database cannot encode. Nobody has seen the event yet: it can still change.
                    raw = event.raw_json
                    event.replace_text(clean_text(event.json), None if raw is None else escape_surrogates(raw))
                elif attempt == 1:
                    event.replace_text(_stand_in(event, f"{type(exc).__name__}: {exc}"), None, "error")
        failed.kept(3)  # not in the store: the log goes on past it (no gap is waited for)
        marks[event.session_id] = max(marks.get(event.session_id, 0), event.sequence)

    # ---- reading -----------------------------------------------------------------------------
    def flushed_sequence(self, session_id: str) -> int:
        return self._flushed.get(session_id, 0)

    def stats(self, session_id: str) -> LogStats:
        return self._stats.get(session_id) or LogStats()

    def load_sessions(self) -> list[dict[str, Any]]:
        return list(self._records)

    def read(self, session_id: str, after: int, limit: int | None, before: int | None = None) -> list[StoredEvent]:
        return self.backend.read(session_id, after, limit, before)

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.backend.executor, self.backend.read, session_id, after, limit, before)


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


def events_size(batch: list[Any]) -> int:
    """The bytes of a batch of events; -1 when it holds another kind of entry. (A loop, not a
    generator: this is on every commit's path.)"""
    size = 0
    for entry in batch:
        if type(entry) is not StoredEvent:
            return -1
        size += entry.size
    return size


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
