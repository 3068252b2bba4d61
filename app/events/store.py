"""Event storage backends. The session log talks to this interface only.

A store keeps every event once, with its sequence, plus one record per session (what a restarted
server needs to list it again). ``append`` may be asynchronous underneath (the SQLite store writes
in batches from a thread); ``flushed_sequence`` tells the log up to where ``read`` can answer, so
the log keeps everything newer in its in-memory tail. An asynchronous store tells each attached
log, on the event loop, what it committed (``committed``), when it stops and resumes writing
(``storage_changed``) and which event it could not keep as it was (``store_failed``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .stored import StoredEvent


# The longest session id every store keeps, in bytes of UTF-8: PostgreSQL bounds index entries
# (~2.7 KB) and notification payloads (8,000 bytes, which carry ids); the SQLite store keeps the
# same ids, so a data dir's sessions can move to a shared database.
SESSION_ID_MAX_BYTES = 1024


def session_id_problem(session_id: str) -> str | None:
    """Why no store can keep this session id (None: every store can): too long, or a control
    character (NUL, which PostgreSQL's text cannot hold, among them) or a lone surrogate."""
    size = len(session_id.encode("utf-8", "surrogatepass"))
    if size > SESSION_ID_MAX_BYTES:
        return f"session id is {size} bytes long; at most {SESSION_ID_MAX_BYTES} are allowed"
    for char in session_id:
        if char < " " or "\x7f" <= char <= "\x9f" or "\ud800" <= char <= "\udfff":
            return f"session id holds the control character U+{ord(char):04X}"
    return None


@dataclass(slots=True, frozen=True)
class LogStats:
    """What a log needs to continue an existing session: counters of the stored events."""

    count: int = 0
    last_sequence: int = 0
    updated_ns: int = 0


class StoreListener(Protocol):
    def committed(self, sequence: int) -> None: ...

    def storage_changed(self, cause: str | None) -> None: ...

    def store_failed(self, sequence: int, message: str) -> None: ...


class EventStore(Protocol):
    # True: an appended event is committed when append returns.
    synchronous: bool

    @property
    def unavailable(self) -> str | None:
        """Why the store cannot write now (None: it can)."""

    def open(self) -> None:
        """Acquire the storage (files, writer thread). Called once, before any other method."""

    def append(self, event: StoredEvent) -> bool:
        """Take the event; it is readable through ``read`` once ``flushed_sequence`` reaches it.
        False: refused, the backlog of events waiting for the disk is full."""

    def attach(self, session_id: str, listener: StoreListener) -> None:
        """Tell ``listener`` about the session's commits and the store's state."""

    def forget(self, session_id: str) -> None:
        """Drop the listener of the session."""

    def flushed_sequence(self, session_id: str) -> int:
        """Every appended event of the session up to this sequence is readable through ``read``."""

    def read(self, session_id: str, after: int, limit: int | None, before: int | None = None) -> list[StoredEvent]:
        """Flushed events with ``after < sequence < before``, oldest first, at most ``limit``."""

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        """``read`` without blocking the event loop."""

    def stats(self, session_id: str) -> LogStats: ...

    def save_session(self, session_id: str, record: dict[str, Any]) -> None:
        """Keep (replace) the session's record."""

    def load_sessions(self) -> list[dict[str, Any]]:
        """Every saved session record, oldest first."""

    def delete_session(self, session_id: str) -> None:
        """Remove the session's record and events."""

    def close(self) -> None:
        """Write out everything taken and release the storage."""


class MemoryEventStore:
    """Keeps every event in memory; for tests and for running without a data dir."""

    synchronous = True
    unavailable: str | None = None

    def __init__(self) -> None:
        self._events: dict[str, list[StoredEvent]] = {}
        self._seqs: dict[str, list[int]] = {}
        self._sessions: dict[str, dict[str, Any]] = {}

    def open(self) -> None:
        pass

    def append(self, event: StoredEvent) -> bool:
        self._events.setdefault(event.session_id, []).append(event)
        self._seqs.setdefault(event.session_id, []).append(event.sequence)
        return True

    def attach(self, session_id: str, listener: StoreListener) -> None:
        pass

    def forget(self, session_id: str) -> None:
        pass

    def flushed_sequence(self, session_id: str) -> int:
        seqs = self._seqs.get(session_id)
        return seqs[-1] if seqs else 0

    def read(self, session_id: str, after: int, limit: int | None, before: int | None = None) -> list[StoredEvent]:
        events = self._events.get(session_id, [])
        seqs = self._seqs.get(session_id, [])
        start = bisect.bisect_right(seqs, after)
        end = len(events) if before is None else bisect.bisect_left(seqs, before)
        if limit is not None:
            end = min(end, start + limit)
        return events[start:end]

    async def read_async(
        self, session_id: str, after: int, limit: int | None, before: int | None = None
    ) -> list[StoredEvent]:
        return self.read(session_id, after, limit, before)

    def stats(self, session_id: str) -> LogStats:
        events = self._events.get(session_id)
        if not events:
            return LogStats()
        return LogStats(len(events), events[-1].sequence, 0)

    def save_session(self, session_id: str, record: dict[str, Any]) -> None:
        self._sessions[session_id] = record

    def load_sessions(self) -> list[dict[str, Any]]:
        return list(self._sessions.values())

    def delete_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._events.pop(session_id, None)
        self._seqs.pop(session_id, None)

    def close(self) -> None:
        pass
