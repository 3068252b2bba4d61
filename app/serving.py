"""The server's connections, under uvicorn: how many may be open, how long a request head and a
stalled body may take, and the open-file limit they draw on.

uvicorn closes a connection that never sends a request only when its client does, so a thousand
idle sockets use up every descriptor and lock everyone out. ``GuardedHttpTools`` is uvicorn's
httptools protocol (given to uvicorn as its ``http`` class) with, per connection:

- a deadline for a complete request head (from the connection's start, or from the first byte of a
  later request on a kept-alive connection): past it the connection is closed;
- a deadline for body progress: a request whose body stops arriving for that long is closed (not
  while the server itself does not read, or waits to send ``100 Continue``);
- a cap on open connections. At the cap, the connection that has been idle longest (no request
  running: it has not sent a complete head yet, or waits between requests) is closed to make room,
  if it has been idle for ``IDLE_GRACE``; otherwise the new connection is refused at once. So a
  flood of idle connections cannot keep a client out whose requests come quickly, and a client's
  new connection is not closed while it is sending its first request;
- ``scope["extensions"]["acp-rest-bridge.abort"]``: closes the connection at once, unsent data
  dropped, for a response that gives up on its reader (``api/sse.py``).

What was refused or closed is counted and logged in one line at most every ``LOG_INTERVAL`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.middleware import ABORT_EXTENSION

log = logging.getLogger("acp_rest_bridge.connections")

# A connection idle for less than this is not closed to make room (it may be sending its request).
IDLE_GRACE = 1.0
# At most one log line per this many seconds.
LOG_INTERVAL = 10.0
# With no cap set: this share of the open-file limit, the rest left to agents, terminals and files.
AUTO_SHARE = 0.5
AUTO_MAX = 10_000


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (a default of 1,024 is a few hundred clients);
    returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("cannot raise the open-file limit from %d to %d", soft, target)
    return soft


def connection_cap(setting: int, open_files: int) -> int:
    """The cap: the setting, or (0) a share of the open-file limit."""
    if setting > 0:
        return setting
    return max(16, min(AUTO_MAX, int(open_files * AUTO_SHARE)))


@dataclass
class ConnectionLimits:
    max_connections: int
    header_timeout: float
    body_timeout: float


class Connections:
    """What every connection of the server shares: the count, the idle ones (oldest first), the
    counters of the log line."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open = 0
        self.idle: OrderedDict[GuardedHttpTools, float] = OrderedDict()  # -> idle since (loop time)
        self.counts = {"refused": 0, "made room": 0, "head": 0, "body": 0}
        self.totals = dict(self.counts)
        self._flush: asyncio.TimerHandle | None = None
        self._last_line = float("-inf")

    def admit(self, connection: GuardedHttpTools, now: float) -> bool:
        if self.open >= self.limits.max_connections:
            oldest = next(iter(self.idle.items()), None)
            if oldest is None or now - oldest[1] < IDLE_GRACE:
                self.note("refused")
                return False
            self.release(oldest[0])  # counted out now: its close is reported later
            oldest[0].close_idle()
            self.note("made room")
        self.open += 1
        connection.counted = True
        self.idle[connection] = now
        return True

    def release(self, connection: GuardedHttpTools) -> None:
        if connection.counted:
            connection.counted = False
            self.open -= 1
        self.idle.pop(connection, None)

    def busy(self, connection: GuardedHttpTools) -> None:
        self.idle.pop(connection, None)

    def idle_again(self, connection: GuardedHttpTools, now: float) -> None:
        if connection.counted:
            self.idle[connection] = now
            self.idle.move_to_end(connection)

    def note(self, what: str) -> None:
        self.counts[what] += 1
        self.totals[what] += 1
        if self._flush is None:
            loop = asyncio.get_running_loop()
            # A second's worth in the first line of a burst, then one line per interval at most.
            delay = max(1.0, self._last_line + LOG_INTERVAL - loop.time())
            self._flush = loop.call_later(delay, self.log_line)

    def log_line(self) -> None:
        self._flush = None
        self._last_line = asyncio.get_running_loop().time()
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        limits = self.limits
        parts = []
        if counts["refused"]:
            parts.append(f"{counts['refused']} refused at the cap of {limits.max_connections} open connections")
        if counts["made room"]:
            parts.append(f"{counts['made room']} idle ones closed to make room at the cap")
        if counts["head"]:
            parts.append(f"{counts['head']} closed without a complete request head in {limits.header_timeout:g} s")
        if counts["body"]:
            parts.append(f"{counts['body']} closed with a request body stalled for {limits.body_timeout:g} s")
        if parts:
            settings = "ACP_BRIDGE_MAX_CONNECTIONS, ..._HEADER_TIMEOUT, ..._BODY_TIMEOUT"
            log.warning("connections: %s (%s)", "; ".join(parts), settings)


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and the cap above (``protocol_class`` gives
    it its ``Connections`` as ``guard``)."""

    guard: ClassVar[Connections]
    admitted = False
    counted = False
    head_deadline: asyncio.TimerHandle | None = None
    body_deadline: asyncio.TimerHandle | None = None
    body_seen = 0.0
    body_done = True

    # ---- the connection ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.guard.admit(self, self.loop.time()):
            transport.abort()  # at once, no lingering descriptor
            return
        self.admitted = True
        super().connection_made(transport)
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self.guard.release(self)
        self._cancel_deadlines()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            super().data_received(data)

    def close_idle(self) -> None:
        """Closed to make room for a new connection."""
        if self.cycle is None:  # no request was ever started: nothing to say goodbye to
            self.transport.abort()
        else:
            self.transport.close()

    def abort(self) -> None:
        if self.admitted:
            self.transport.abort()

    # ---- the request head -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
        extensions[ABORT_EXTENSION] = self.abort
        self._arm_head()  # a later request on a kept-alive connection

    def _arm_head(self) -> None:
        if self.head_deadline is None:
            self.head_deadline = self.loop.call_later(self.guard.limits.header_timeout, self._head_overdue)

    def _head_overdue(self) -> None:
        self.head_deadline = None
        if self.admitted and not self.transport.is_closing():
            self.guard.note("head")
            self.transport.abort()

    def on_headers_complete(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None
        self.guard.busy(self)
        self.body_done = False
        self.body_seen = self.loop.time()
        super().on_headers_complete()
        if not self.body_done and self.body_deadline is None:
            self.body_deadline = self.loop.call_later(self.guard.limits.body_timeout, self._body_check)

    # ---- the body ---------------------------------------------------------------------------
    def on_body(self, body: bytes) -> None:
        self.body_seen = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        self.body_done = True
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None
        super().on_message_complete()

    def _body_check(self) -> None:
        self.body_deadline = None
        if self.body_done or not self.admitted or self.transport.is_closing():
            return
        now = self.loop.time()
        cycle = self.cycle
        # Not the client's fault: the server reads no more for now, or has not asked for the body.
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self.body_seen = now
        left = self.body_seen + self.guard.limits.body_timeout - now
        if left <= 0:
            self.guard.note("body")
            self.transport.abort()
            return
        self.body_deadline = self.loop.call_later(left, self._body_check)

    # ---- between requests ---------------------------------------------------------------------
    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.admitted and not self.transport.is_closing() and not self.pipeline:
            self.guard.idle_again(self, self.loop.time())

    def _cancel_deadlines(self) -> None:
        for handle in (self.head_deadline, self.body_deadline):
            if handle is not None:
                handle.cancel()
        self.head_deadline = self.body_deadline = None


def protocol_class(connections: Connections) -> type[GuardedHttpTools]:
    """The class uvicorn is given as ``http``: ``GuardedHttpTools`` bound to ``connections``."""
    return type("BridgeHttpProtocol", (GuardedHttpTools,), {"guard": connections})
