"""Resuming an SSE stream after a drop: where it was, how often to try again."""

from __future__ import annotations

import httpx

from .models import UniversalEvent

# What a dropped connection raises (reset, cut mid-frame, refused, a read that timed out).
RECONNECT_ERRORS = (httpx.TransportError,)


class Resume:
    """The last sequence a stream yielded and the reconnects tried since its last event."""

    def __init__(self, last: int, attempts: int, delay: float) -> None:
        self.last = last
        self.attempts = attempts
        self.delay = delay
        self.failures = 0
        self.cause: BaseException | None = None

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self.last > 0:
            headers["Last-Event-ID"] = str(self.last)
        return headers

    def seen(self, event: UniversalEvent) -> bool:
        """Whether the event was yielded already (a replay after a reconnect); else records it."""
        sequence = event["sequence"]
        if sequence <= self.last:
            return True
        self.last = sequence
        self.failures = 0
        return False

    def dropped(self, cause: BaseException | None) -> None:
        self.failures += 1
        self.cause = cause

    def next_delay(self) -> float | None:
        """Seconds before the next try, or None once the tries are spent."""
        if self.failures > self.attempts:
            return None
        return float(self.delay * 2 ** (self.failures - 1))

    def give_up_message(self) -> str:
        cause = f": {self.cause!r}" if self.cause is not None else " (the server kept closing the stream)"
        return f"event stream lost after {self.attempts} reconnects, last sequence {self.last}{cause}"
