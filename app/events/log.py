"""Per-session event log: sequence numbers, storage, reads, and live fan-out.

The log is the source of truth. Appends are synchronous (no await), so events keep the order in
which the bridge saw the ACP messages. Readers subscribe with an offset; a subscription replays
from the store and then follows live events. A reader that falls behind is never skipped: its
bounded queue overflows into "catching up", and it reads the store again until it has caught up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from app.translate.drafts import EventDraft
from app.translate.envelope import dumps, envelope_json, now_ns, with_raw

from .store import EventStore


@dataclass(slots=True, frozen=True)
class StoredEvent:
    session_id: str
    sequence: int
    type: str
    json: str  # the envelope, "raw":null last
    raw_json: str | None

    def render(self, include_raw: bool) -> str:
        return with_raw(self.json, self.raw_json) if include_raw else self.json


class Subscription:
    """One reader's view of a session log: backlog after ``after``, then live events, in order."""

    CATCH_UP_BATCH = 512

    def __init__(self, log: SessionEventLog, after: int, queue_size: int) -> None:
        self._log = log
        self.last = after
        self._queue: deque[StoredEvent] = deque()
        self._queue_size = queue_size
        # Start by reading the store: that is the replay, and it is also how a lagging reader catches up.
        self._catching_up = True
        self._wakeup = asyncio.Event()
        self.closed = False

    def _push(self, event: StoredEvent) -> None:
        if self._catching_up or self.closed:
            return
        if len(self._queue) >= self._queue_size:
            # Too far behind for the live queue: drop it and read the store from self.last instead.
            self._queue.clear()
            self._catching_up = True
        else:
            self._queue.append(event)
        self._wakeup.set()

    def _wake(self) -> None:
        self._wakeup.set()

    def next_nowait(self) -> StoredEvent | None:
        """The next event if one is available without waiting."""
        while True:
            if self._queue:
                event = self._queue.popleft()
                if event.sequence <= self.last:
                    continue
                self.last = event.sequence
                return event
            if not self._catching_up:
                return None
            batch = self._log.read_after(self.last, self.CATCH_UP_BATCH)
            if batch:
                self._queue.extend(batch)
                continue
            # Nothing more in the store: live events from here on. No await happened since the read,
            # so no event can fall between the store and the live queue.
            self._catching_up = False
            return None

    async def next(self, timeout: float | None = None) -> StoredEvent | None:
        """Wait for the next event; None on timeout or when the subscription is closed."""
        while not self.closed:
            event = self.next_nowait()
            if event is not None:
                return event
            self._wakeup.clear()
            try:
                if timeout is None:
                    await self._wakeup.wait()
                else:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                return None
        return None

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
            self._wakeup.set()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionEventLog:
    def __init__(
        self,
        session_id: str,
        store: EventStore,
        *,
        queue_size: int = 1024,
        on_append: Callable[[StoredEvent], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self.native_session_id: str | None = None
        self._store = store
        self._queue_size = queue_size
        self._subscribers: set[Subscription] = set()
        self._on_append = on_append
        self.last_sequence = store.last_sequence(session_id)
        self.count = store.count(session_id)
        self.updated_ns = 0

    def append(self, draft: EventDraft) -> StoredEvent:
        """Give the draft its sequence, store it and hand it to every live reader. Never awaits."""
        self.last_sequence += 1
        ns = now_ns()
        native = draft.native_session_id or self.native_session_id
        event_json = envelope_json(
            sequence=self.last_sequence,
            time_ns=ns,
            session_id=self.session_id,
            native_session_id=native,
            synthetic=draft.synthetic,
            event_type=draft.type,
            data=draft.data,
        )
        raw_json = None if draft.raw is None else dumps(draft.raw)
        event = StoredEvent(self.session_id, self.last_sequence, draft.type, event_json, raw_json)
        self._store.append(event)
        self.count += 1
        self.updated_ns = ns
        for sub in tuple(self._subscribers):
            sub._push(event)
        if self._on_append is not None:
            self._on_append(event)
        return event

    def read_after(self, after: int, limit: int | None) -> list[StoredEvent]:
        return self._store.read(self.session_id, after, limit)

    def page(self, offset: int, limit: int | None) -> tuple[list[StoredEvent], bool]:
        """Legacy GET /events: events with sequence > offset; hasMore only when limit cut the list."""
        if limit is None:
            return self.read_after(offset, None), False
        events = self.read_after(offset, limit + 1)
        return events[:limit], len(events) > limit

    def subscribe(self, after: int) -> Subscription:
        sub = Subscription(self, after, self._queue_size)
        self._subscribers.add(sub)
        return sub

    def close_subscribers(self) -> None:
        for sub in tuple(self._subscribers):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
