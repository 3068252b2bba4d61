"""Event storage backends. The session log talks to this interface only."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .log import StoredEvent


class EventStore(Protocol):
    def append(self, event: StoredEvent) -> None: ...

    def read(self, session_id: str, after: int, limit: int | None) -> list[StoredEvent]: ...

    def last_sequence(self, session_id: str) -> int: ...

    def count(self, session_id: str) -> int: ...

    def close(self) -> None: ...


class MemoryEventStore:
    """Keeps every event in memory; for tests and for running without a data dir."""

    def __init__(self) -> None:
        self._events: dict[str, list[StoredEvent]] = {}
        self._seqs: dict[str, list[int]] = {}

    def append(self, event: StoredEvent) -> None:
        self._events.setdefault(event.session_id, []).append(event)
        self._seqs.setdefault(event.session_id, []).append(event.sequence)

    def read(self, session_id: str, after: int, limit: int | None) -> list[StoredEvent]:
        events = self._events.get(session_id, [])
        start = bisect.bisect_right(self._seqs.get(session_id, []), after)
        end = len(events) if limit is None else start + limit
        return events[start:end]

    def last_sequence(self, session_id: str) -> int:
        seqs = self._seqs.get(session_id)
        return seqs[-1] if seqs else 0

    def count(self, session_id: str) -> int:
        return len(self._events.get(session_id, []))

    def close(self) -> None:
        pass
