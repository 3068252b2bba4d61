"""The webhook outbox: deliveries not yet made, kept so that a crash or a restart loses none.

``OutboxStore`` is what the dispatcher needs from a backend; ``SqliteOutbox``
(``app/webhooks/sqlite_outbox.py``) keeps it in the data dir of a single bridge, ``PostgresOutbox``
(``app/webhooks/postgres_outbox.py``) in a fleet's database, where any live bridge takes over what a
dead one left. Every method may block: the dispatcher calls them on a thread of its own, one at a
time, in the order it issued them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class WebhookConfigError(ValueError):
    """The webhook settings cannot work (said at start, in one line)."""


@dataclass(slots=True)
class Delivery:
    """One event for one endpoint."""

    endpoint: str  # the URL
    session_id: str
    sequence: int
    event_type: str
    payload: str  # the JSON body, signed as it is
    attempts: int = 0  # tries made so far
    next_at: float = 0.0  # time.time() of the next try

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.endpoint, self.session_id, self.sequence)


class OutboxStore(Protocol):
    # Seconds between two ``rescue`` calls; 0: the outbox has nothing to rescue (one bridge).
    rescue_interval: float

    def open(self) -> bool:
        """Acquire the storage; True when it was just created (it has seen no session yet)."""

    def pending(self) -> list[Delivery]:
        """Every delivery still to be made, by endpoint, session and sequence."""

    def marks(self) -> dict[str, int]:
        """Per session, the newest sequence handed to ``add`` (or set by ``set_marks``): the
        events after it have not been looked at by the outbox."""

    def set_marks(self, marks: dict[str, int]) -> None:
        """Sessions the outbox must not look at before these sequences (those older than itself)."""

    def add(self, deliveries: list[Delivery]) -> list[Delivery]:
        """Keep these deliveries (one already kept is left as it is) and advance their sessions' marks.
        Returns deliveries of earlier events the outbox found missing meanwhile (committed by a
        bridge that died before it kept them), kept now too, for the caller to queue."""

    def delivered(self, delivery: Delivery) -> None:
        """The delivery was accepted: forget it."""

    def retry_later(self, delivery: Delivery) -> None:
        """Keep its ``attempts`` and ``next_at``."""

    def failed(self, delivery: Delivery, reason: str) -> None:
        """No more tries: kept as failed (for an operator), never delivered again."""

    def prune(self, before: float) -> int:
        """Delete the deliveries that failed before ``before`` (a ``time.time()``); how many."""

    def rescue(self) -> list[Delivery]:
        """What dead bridges left (a fleet): their pending deliveries, and those of events they
        committed but never kept, now this bridge's to deliver."""

    def close(self) -> None: ...
