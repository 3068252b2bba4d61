"""Per-session event log: sequence numbers, storage, reads, and live fan-out.

The store (SQLite in the data dir) is the source of truth. ``append`` is synchronous (no await), so
events keep the order in which the bridge saw the ACP messages; it hands the event to the store,
whose writer thread commits it shortly after, and keeps it in a bounded in-memory *tail*: the
newest events, always including every event the store has not committed yet. Reads look at the
tail first and ask the store only for what is older than the tail.

Durable before visible: an event reaches no reader (pages, SSE, ``count``) before the store has
committed it; ``visible_sequence`` is the newest such event. While the store cannot write (a full
or failing disk) the log says so once with an ``error`` event and shows its events from memory;
they are written, in order, when the store recovers.

Readers are cursors (``Subscription``): the last sequence they have. A reader's queue is the part of
the tail after its cursor, so it is bounded by the tail and costs no copy; the store's notice of a
commit only wakes the readers that are waiting. A reader that falls further behind than the tail is never skipped and
holds nothing back: it reads from the store until it is inside the tail again, then follows live.
Everything is by sequence, so replay and live can have no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, Callable
from operator import attrgetter
from time import time_ns
from typing import Any

from app.events.envelope import envelope_json, now_ns
from app.events.model import ERROR, EventDraft, raw_json_text

from .store import EventStore
from .stored import StoredEvent as StoredEvent  # the log's events; importable from here too

# How long a page waits for the commit of what this bridge recorded before it was asked for; past
# that (a store that cannot write) it answers with what is visible.
PAGE_SETTLE = 1.0


def trim_heap() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (None elsewhere): without it, freed memory stays in the process."""
    import ctypes.util  # here, not at start-up (~4 ms)

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_sequence = attrgetter("sequence")


class Subscription:
    """One reader's cursor on a session log: events after ``last``, backlog then live, in order."""

    BATCH = 512

    def __init__(self, log: SessionEventLog, after: int) -> None:
        self._log = log
        self.last = after
        self.closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False
        self._pending: list[StoredEvent] = []
        self._pending_at = 0

    async def next_batch(self, limit: int = BATCH) -> list[StoredEvent]:
        """The next events after the cursor (at least one); waits for them. [] once closed, or
        when ``wake`` interrupts the wait."""
        if self._pending_at < len(self._pending):  # left over from next()
            batch = self._pending[self._pending_at : self._pending_at + limit]
            self._pending_at += len(batch)
            return batch
        while not self.closed:
            batch = await self._log.read_after_async(self.last, limit)
            if batch:
                self.last = batch[-1].sequence
                return batch
            if self.closed:
                break
            # Nothing after the cursor, decided without a suspension since the last read: any later
            # event comes through append, which resolves this future.
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            self._log._waiters.append(waiter)
            try:
                await waiter
                if self._woken:
                    break
                # Woken by the first new event: what the callbacks already queued add in this same
                # loop pass (the rest of a read, a turn's end) goes out in the same write.
                await asyncio.sleep(0)
            finally:
                self._waiter = None
                if waiter.cancelled() or self._woken:  # leave no dead future on an idle log
                    self._woken = False
                    self._log._discard_waiter(waiter)
        return []

    def wake(self) -> None:
        """A ``next_batch`` waiting for events returns [] now (its reader has something to write)."""
        if self._waiter is not None and not self._waiter.done():
            self._woken = True
            self._waiter.set_result(None)

    async def next(self, timeout: float | None = None) -> StoredEvent | None:
        """The next event; None on timeout or once closed."""
        if self._pending_at >= len(self._pending):
            try:
                async with asyncio.timeout(timeout):
                    self._pending = await self.next_batch()
            except TimeoutError:
                return None
            self._pending_at = 0
            if not self._pending:
                return None
        event = self._pending[self._pending_at]
        self._pending_at += 1
        return event

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> StoredEvent:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._log._subscribers.discard(self)
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(None)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionEventLog:
    PAGE_BATCH = 4096
    TAIL_BYTES = 4 * 1024 * 1024

    def __init__(
        self,
        session_id: str,
        store: EventStore,
        *,
        tail_size: int = 4096,
        tail_bytes: int | None = None,
        on_append: Callable[[StoredEvent], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self.native_session_id: str | None = None
        self._store = store
        stats = store.stats(session_id)
        self.last_sequence = stats.last_sequence  # given out (visible or not yet)
        self.visible_sequence = stats.last_sequence  # committed (or shown from memory, see above)
        self._count = stats.count
        self.updated_ns = stats.updated_ns
        self._tail: list[StoredEvent] = []
        self._tail_bytes = 0
        # Bytes appended before each event of the tail (a running total): the size of any part
        # of the tail in two lookups.
        self._offsets: list[int] = []
        self._appended_bytes = 0
        self._trimmed_with = 0  # the store's committed sequence when the tail was last trimmed
        self._tail_size = max(tail_size, 1)
        self._tail_bytes_max = max(tail_bytes if tail_bytes is not None else self.TAIL_BYTES, 1)
        # Trimming is amortised: it runs when the tail has grown by this much.
        self._slack = max(self._tail_size // 4, 64)
        self._trim_at = self._tail_size + self._slack
        self._waiters: list[asyncio.Future[None]] = []
        self._subscribers: set[Subscription] = set()
        self._on_append = on_append
        self.finished = False  # the session ended: keep nothing in memory that the store has
        self._from_memory = False  # the store cannot write: events are shown before they are
        self._announced = False  # ... and this log has said so
        self._dropped = 0  # events refused while the store's backlog was full
        # The error events this log recorded about events the store could not keep: when one of
        # them cannot be kept either, no further error event is made of it (a failure never feeds itself).
        self._storage_errors: tuple[int, ...] = ()  # the newest few
        store.attach(session_id, self)

    @property
    def count(self) -> int:
        """Events a reader can get (``eventCount``): never one that is not committed."""
        self._catch_up()
        return self._count - (self.last_sequence - self.visible_sequence)

    # ---- writing -------------------------------------------------------------------------------
    def append(self, draft: EventDraft) -> StoredEvent | None:
        """Give the draft its sequence and hand it to the store; readers see it once it is
        committed. Never awaits. None when the store refused it (its backlog is full)."""
        sequence = self.last_sequence + 1
        ns = time_ns()
        event_json = envelope_json(
            sequence=sequence,
            time_ns=ns,
            session_id=self.session_id,
            native_session_id=draft.native_session_id or self.native_session_id,
            synthetic=draft.synthetic,
            event_type=draft.type,
            data=draft.data,
            data_json=draft.data_json,
        )
        raw = draft.raw
        # The agent's own JSON text when the connection kept it; else serialised on first use.
        text = None if raw is None else raw_json_text(raw)
        if text is not None or raw is None:
            event = StoredEvent(self.session_id, sequence, draft.type, event_json, text, ns)
        else:
            event = StoredEvent(self.session_id, sequence, draft.type, event_json, None, ns, raw=raw)
        if not self._store.append(event):
            # Not kept anywhere, so it gets no sequence: the log stays gap-free and says later
            # how many events it could not keep.
            self._dropped += 1
            return None
        self.last_sequence = sequence
        tail = self._tail
        tail.append(event)
        self._offsets.append(self._appended_bytes)
        self._appended_bytes += event.size
        self._tail_bytes += event.size
        if len(tail) >= self._trim_at or (
            # Over its bytes: a trim can drop something only once the store committed more.
            self._tail_bytes > self._tail_bytes_max
            and self._store.flushed_sequence(self.session_id) != self._trimmed_with
        ):
            self._trim()
        self._count += 1
        self.updated_ns = ns
        if self._from_memory or self._store.synchronous:
            self._reveal(sequence)
        return event

    def committed(self, sequence: int) -> None:
        """The store committed this log's events up to ``sequence`` (event loop thread)."""
        if sequence > self.visible_sequence:
            self._reveal(min(sequence, self.last_sequence))
        if self.finished or self._tail_bytes > self._tail_bytes_max:
            self._trim()

    def follow(self, sequence: int) -> None:
        """Another bridge (sharing the store) committed this session's events up to ``sequence``:
        readers here get them, from the store. Also where a bridge that takes the session over
        continues numbering."""
        if sequence > self.last_sequence:
            self._count += sequence - self.last_sequence
            self.last_sequence = sequence
            self.updated_ns = now_ns()
            self._reveal(sequence)

    def _catch_up(self) -> None:
        # Reads pick up what the writer committed even before its notice arrives (or with no
        # event loop to deliver it).
        flushed = self._store.flushed_sequence(self.session_id)
        if flushed > self.visible_sequence:
            self._reveal(min(flushed, self.last_sequence))

    def _reveal(self, sequence: int) -> None:
        first = self.visible_sequence
        self.visible_sequence = sequence
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        if self._on_append is not None:
            tail = self._tail
            for event in tail[bisect_right(tail, first, key=_sequence) :]:
                if event.sequence > sequence:
                    break
                self._on_append(event)

    async def settled(self, timeout: float = 1.0) -> bool:
        """Wait until every event appended so far is visible (committed): a request that recorded
        events answers after them, so the client reads what it caused. False on timeout."""
        target = self.last_sequence
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._catch_up()
                    if self.visible_sequence >= target:
                        return True
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    finally:
                        if waiter.cancelled():
                            self._discard_waiter(waiter)
        except TimeoutError:
            return False

    def storage_changed(self, cause: str | None) -> None:
        """The store stopped (``cause``) or resumed (None) writing."""
        if cause is not None:
            self._from_memory = True
            self._reveal(self.last_sequence)
            if not self.finished and not self._announced:
                self._announced = True
                self._error("storage_unavailable", f"events cannot be stored: {cause}", {"cause": cause})
            return
        self._from_memory = False
        self._announced = False
        if self._dropped:
            dropped, self._dropped = self._dropped, 0
            self._error(
                "storage_unavailable",
                f"{dropped} events could not be kept while storage was unavailable",
                {"dropped": dropped},
            )

    def store_failed(self, sequence: int, message: str) -> None:
        """The store could not keep event ``sequence`` as it was (it kept a stand-in, or nothing);
        told once per batch it wrote."""
        if sequence in self._storage_errors:
            return  # the error event about an earlier failure: the store logged it, that is all
        event = self._error("storage_error", f"event {sequence} could not be stored: {message}", {"sequence": sequence})
        if event is not None:
            self._storage_errors = (*self._storage_errors[-7:], event.sequence)

    def _error(self, code: str, message: str, details: dict[str, Any]) -> StoredEvent | None:
        return self.append(EventDraft(ERROR, {"message": message, "code": code, "details": details}, synthetic=True))

    def finish(self) -> None:
        """The session ended: its events are read from the store from now on."""
        self.finished = True
        if self._tail:
            self._trim()
            # Hand the heap pages the freed events used back to the system (off the event loop,
            # as it walks the heap; nothing waits for it).
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().run_in_executor(None, trim_heap)

    def _discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def _trim(self) -> None:
        """Keep the newest committed events up to the tail size and bytes, besides the
        uncommitted ones (never dropped): a reader a little behind the commits reads from memory,
        not from the store. A finished log keeps only uncommitted ones."""
        tail = self._tail
        offsets = self._offsets
        flushed = self._trimmed_with = self._store.flushed_sequence(self.session_id)
        committed = bisect_right(tail, flushed, key=_sequence)
        if self.finished:
            drop = committed
        else:
            drop = max(committed - self._tail_size, 0)
            if committed > drop:
                end = offsets[committed] if committed < len(tail) else self._appended_bytes
                if end - offsets[drop] > self._tail_bytes_max:
                    # The first event from which the committed part fits in the bytes.
                    drop = bisect_left(offsets, end - self._tail_bytes_max, drop, committed)
        if drop > 0:
            del tail[:drop]
            del offsets[:drop]
        self._tail_bytes = self._appended_bytes - offsets[0] if tail else 0
        if self.finished and not tail:
            self._tail = []  # give the lists' memory back too
            self._offsets = []
        self._trim_at = len(self._tail) + self._slack

    # ---- reading -------------------------------------------------------------------------------
    def _from_tail(self, after: int, limit: int | None) -> list[StoredEvent] | None:
        """Visible events after ``after`` if the tail holds all of them; None when the store is needed."""
        self._catch_up()
        visible = self.visible_sequence
        if after >= visible:
            return []
        tail = self._tail
        if not tail or after < tail[0].sequence - 1:
            return None
        start = bisect_right(tail, after, key=_sequence)
        end = bisect_right(tail, visible, key=_sequence)
        if limit is not None:
            end = min(end, start + limit)
        return tail[start:end]

    def read_after(self, after: int, limit: int | None) -> list[StoredEvent]:
        """Events with sequence > after, oldest first (blocking read of the store if needed)."""
        events = self._from_tail(after, limit)
        if events is not None:
            return events
        before = self._tail[0].sequence if self._tail else None
        events = self._store.read(self.session_id, after, limit, before)
        if before is not None and (limit is None or len(events) < limit):
            more = self._from_tail(before - 1, None if limit is None else limit - len(events))
            events = events + (more or [])
        return events

    async def read_after_async(self, after: int, limit: int | None) -> list[StoredEvent]:
        """Like ``read_after`` but the store is read off the event loop. Returns [] only when
        nothing after ``after`` exists, and decides that without suspending."""
        while True:
            events = self._from_tail(after, limit)
            if events is not None:
                return events
            before = self._tail[0].sequence if self._tail else None
            events = await self._store.read_async(self.session_id, after, limit, before)
            if events:
                return events
            if before is None:
                # Neither the store nor the tail has more (a gap at the end of a restored log).
                after = max(after, self.visible_sequence)
            else:
                after = max(after, before - 1)  # nothing below the tail: continue inside it

    async def page_batches(self, offset: int, limit: int | None) -> AsyncIterator[list[StoredEvent]]:
        """The events of a legacy GET /events page in batches: sequence > offset, at most
        ``limit + 1`` of them (the one past the limit only tells that there is more)."""
        wanted = None if limit is None else limit + 1
        if self.last_sequence > self.visible_sequence:
            # What this bridge recorded before the request is in the page once committed (a few ms):
            # another bridge, woken by the commit itself, may already have shown it to the client.
            await self.settled(PAGE_SETTLE)
        self._catch_up()
        end = self.visible_sequence  # events recorded while the page is read belong to the next one
        after = offset
        count = 0
        while after < end and (wanted is None or count < wanted):
            # At most a batch at a time, which also keeps a huge limit within the store's integers.
            size = self.PAGE_BATCH if wanted is None else min(self.PAGE_BATCH, wanted - count)
            batch = await self.read_after_async(after, size)
            if batch and batch[-1].sequence > end:
                batch = [e for e in batch if e.sequence <= end]
            if not batch:
                break
            count += len(batch)
            after = batch[-1].sequence
            yield batch

    async def page(self, offset: int, limit: int | None) -> tuple[list[StoredEvent], bool]:
        """Legacy GET /events: events with sequence > offset; hasMore only when limit cut the list."""
        events = [event async for batch in self.page_batches(offset, limit) for event in batch]
        if limit is None:
            return events, False
        return events[:limit], len(events) > limit

    def save_record(self, record: dict[str, Any]) -> None:
        """Keep the session's record (SessionInfo and config) with its events."""
        self._store.save_session(self.session_id, record)

    def subscribe(self, after: int) -> Subscription:
        sub = Subscription(self, after)
        self._subscribers.add(sub)
        return sub

    def close_subscribers(self) -> None:
        for sub in tuple(self._subscribers):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    @property
    def tail_length(self) -> int:
        return len(self._tail)
