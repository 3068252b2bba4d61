"""The server's connections, under uvicorn: how many may be open, how long a request head, a
stalled body and a stalled write may take, how many pipelined requests wait, and the open-file
limit they draw on.

uvicorn closes a connection that never sends a request only when its client does, so a thousand
idle sockets use up every descriptor and lock everyone out; it parses every request a client
pipelines into a queued request of its own, and writes answers to a client that never reads into
memory without limit. ``GuardedHttpTools`` is uvicorn's httptools protocol (given to uvicorn as its
``http`` class) with, per connection:

- a deadline for a complete request head (from the connection's start, or from the first byte of a
  later request on a kept-alive connection): past it the connection is closed;
- a deadline for body progress: a request whose body stops arriving for that long is closed (not
  while the server itself does not read, or waits to send ``100 Continue``);
- a deadline for write progress: a connection whose transport is paused (its buffer over the
  high-water mark, or, once an answer is complete, holding anything of it) and whose buffer has not
  shrunk for that long is aborted (its data dropped). The next pipelined request starts only once
  the previous answer has gone, so a client that never reads holds one answer at most; the kernel
  keeps at most ``UNSENT_LIMIT`` bytes unsent per connection;
- a bound on pipelined requests: once ``pipeline_limit`` wait behind the running one, what the client
  sent beyond them is kept unparsed (reading stops) until answers go out; more than ``HELD_LIMIT``
  bytes of it close the connection;
- a cap on open connections. At the cap, a new connection makes room by closing the connection
  whose reader has taken nothing longest (for ``STUCK_GRACE``: any byte it takes starts that
  anew), else the one idle longest (no request running: it has not sent a complete head yet, or
  waits between requests) if it has been so for ``IDLE_GRACE``. If none is old enough yet, the new
  connection waits, unread, until one is (oldest first), for ``ADMIT_WAIT`` at most: then it is
  answered 503 with ``Connection: close``. Beyond the waiting room (``WAIT_SHARE`` of the cap) a
  new connection is reset at once. So a flood of idle connections or of readers that never read,
  however fast it comes, cannot keep a client out whose requests come quickly, and a client's new
  connection is not closed while it is sending its first request;
- ``scope["extensions"]["acp-rest-bridge.abort"]``: closes the connection at once, unsent data
  dropped, for a response that gives up on its reader (``api/sse.py``);
- one write per pass of the event loop (``CoalescingTransport``): uvicorn writes an answer's head
  and each part of its body as they come; what one pass writes goes out as one ``send`` (a JSON
  answer's head and body, a stream's head and first events), an answer's end at once.

What waited, was refused, reset or closed is counted and logged in one line at most every
``LOG_INTERVAL`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.middleware import ABORT_EXTENSION
from app.errors import ServiceUnavailable

log = logging.getLogger("acp_rest_bridge.connections")

# A connection idle for less than this is not closed to make room (it may be sending its request).
IDLE_GRACE = 1.0
# A connection whose reader has taken nothing for this long may be closed to make room (a client
# that reads takes what it is sent within milliseconds).
STUCK_GRACE = 0.25
# A new connection at the cap waits at most this long for one of the above to be old enough, then is
# answered 503: the connections that arrived with it in one burst are all younger than the graces.
ADMIT_WAIT = 5.0
# Connections beyond the cap that wait or are being answered 503: this share of the cap, at least
# WAIT_MIN; a connection beyond those is reset at once.
WAIT_SHARE = 0.25
WAIT_MIN = 16
# After its 503 (and the end of the server's writes), what a refused client still sends is read and
# dropped until it closes, this long at most: closing with its request unread would reset the
# connection, which can destroy the 503 before the client reads it.
LINGER = 2.0
# Connections stuck writing looked at for progress per decision at the cap (each one that made
# progress goes to the back of the line).
REFRESH_LIMIT = 64
# At most one log line per this many seconds.
LOG_INTERVAL = 10.0
# With no cap set: this share of the open-file limit, the rest left to agents, terminals and files.
AUTO_SHARE = 0.5
AUTO_MAX = 10_000
# After this many connections closed, freed memory is handed back to the system, this many
# seconds later (the closes of a flood come together).
TRIM_AFTER = 256
TRIM_DELAY = 2.0
# Bytes the kernel keeps unsent per connection (TCP_NOTSENT_LOWAT).
UNSENT_LIMIT = 64 * 1024
# Bytes a client may have sent beyond the pipelined requests it waits for before it is closed.
HELD_LIMIT = 64 * 1024


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


def limit_unsent(transport: asyncio.BaseTransport) -> None:
    """Bound what the kernel keeps unsent for a connection: without it, its send buffer grows (to
    4 MB by default on Linux) for a reader that never reads, and the server goes on writing answers
    into it. Data in flight is not limited, so a fast reader far away is not slowed."""
    sock = transport.get_extra_info("socket")
    option = getattr(socket, "TCP_NOTSENT_LOWAT", None)
    if sock is None or option is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, UNSENT_LIMIT)
    except OSError:  # not TCP after all, or an older kernel
        pass


# Writes of one pass up to this many bytes together are joined into one; beyond, a part this large
# goes as it is, the small ones between such parts joined.
JOIN_LIMIT = 16 * 1024


class CoalescingTransport:
    """A connection's transport whose writes wait for the end of the event loop's pass, then go
    out as one (each ``send`` on a loopback or LAN socket costs the server a pass through the TCP
    stack, and the client a wake-up). Everything else is the transport's own; ``flush`` writes
    what waits (the protocol calls it when an answer is complete, before it looks at the buffer)."""

    __slots__ = ("_loop", "_pending", "_size", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0  # bytes in _pending

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        chunk = bytes(data)
        self._pending.append(chunk)
        self._size += len(chunk)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        size, self._pending, self._size = self._size, [], 0
        if self.transport.is_closing():
            return
        if len(pending) == 1:
            self.transport.write(pending[0])
        elif size <= JOIN_LIMIT:
            self.transport.write(b"".join(pending))
        else:
            # A large part is handed over as it is: it is often one object shared by many answers
            # (``/openapi.json``), which a transport keeps by reference until its reader takes it;
            # a joined copy would be one per connection. The small ones around it are joined (a
            # transport handles many small parts one by one: an SSE burst's frames).
            parts: list[bytes] = []
            small: list[bytes] = []
            for data in pending:
                if len(data) < JOIN_LIMIT:
                    small.append(data)
                    continue
                if small:
                    parts.append(b"".join(small))
                    small = []
                parts.append(data)
            if small:
                parts.append(b"".join(small))
            if len(parts) == 1:
                self.transport.write(parts[0])
            else:
                self.transport.writelines(parts)

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._size

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.drop()
        self.transport.abort()

    def drop(self) -> None:
        """The connection is gone: nothing waits any more."""
        self._pending.clear()
        self._size = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def refusal(max_connections: int, admit_wait: float) -> bytes:
    """The answer of a connection that found no room at the cap: 503 ProblemDetails, closed after."""
    error = ServiceUnavailable(
        f"the server has {max_connections} open connections, its most (ACP_BRIDGE_MAX_CONNECTIONS), and none "
        f"could be closed for this one within {admit_wait:g} s; try again"
    )
    body = json.dumps(error.problem()).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


Admission = Literal["open", "wait", "reset"]


@dataclass
class ConnectionLimits:
    max_connections: int
    header_timeout: float
    body_timeout: float
    write_timeout: float = 30.0
    pipeline_limit: int = 4
    admit_wait: float = ADMIT_WAIT


class Connections:
    """What every connection of the server shares: the count, the idle ones and the ones stuck
    writing (oldest first), the ones waiting for room at the cap, the counters of the log line."""

    def __init__(
        self,
        limits: ConnectionLimits,
        trim: Callable[[], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.limits = limits
        # The event loop's time (the protocol's ``now``); a test may give its own.
        self.clock = clock or (lambda: asyncio.get_running_loop().time())
        # Hands freed memory back to the system (``malloc_trim``), run in a thread once many
        # connections have closed: what a flood of them held is not kept by the process.
        self.trim = trim
        self._closed = 0
        self._trim_timer: asyncio.TimerHandle | None = None
        self.open = 0
        self.idle: OrderedDict[GuardedHttpTools, float] = OrderedDict()  # -> idle since (loop time)
        self.stuck: OrderedDict[GuardedHttpTools, float] = OrderedDict()  # -> its reader took nothing since
        self.waiting: OrderedDict[GuardedHttpTools, float] = OrderedDict()  # -> arrived at the cap
        self.refusing: set[GuardedHttpTools] = set()  # answered 503, not closed yet
        self.spare = max(WAIT_MIN, int(limits.max_connections * WAIT_SHARE))
        self.refusal = refusal(limits.max_connections, limits.admit_wait)
        self._wake: asyncio.TimerHandle | None = None
        self._wake_when = 0.0
        self.counts = {
            "waited": 0,
            "refused": 0,
            "reset": 0,
            "made room": 0,
            "stuck made room": 0,
            "head": 0,
            "body": 0,
            "write": 0,
            "held": 0,
        }
        self.totals = dict(self.counts)
        self.longest_wait = 0.0  # of the connections counted in this log line's "waited"
        self._flush: asyncio.TimerHandle | None = None
        self._last_line = float("-inf")

    def admit(self, connection: GuardedHttpTools, now: float) -> Admission:
        """``open``: counted in now. ``wait``: no room yet; ``pump`` lets it in (``enter``) or answers
        it 503 (``refuse``) later. ``reset``: no room and none to wait in."""
        if self.waiting:
            self.pump(now)  # those that came first go first
        if not self.waiting and (self.open < self.limits.max_connections or self._make_room(now)):
            self._count_in(connection, now)
            return "open"
        if len(self.waiting) + len(self.refusing) >= self.spare:
            self.note("reset")
            log.debug("connection from %s reset: %d wait at the cap", connection.peer(), len(self.waiting))
            return "reset"
        self.waiting[connection] = now
        self._schedule(now)
        return "wait"

    def pump(self, now: float) -> None:
        """Lets in the waiting connections, oldest first, as long as there is room or room can be
        made; answers 503 to one that waited ``admit_wait``; sets the timer for the next look."""
        while self.waiting:
            connection, since = next(iter(self.waiting.items()))
            if self.open < self.limits.max_connections or self._make_room(now):
                del self.waiting[connection]
                self._count_in(connection, now)
                self.note("waited")
                self.longest_wait = max(self.longest_wait, now - since)
                self._hand_over(connection.enter)
            elif now - since >= self.limits.admit_wait:
                del self.waiting[connection]
                self.refusing.add(connection)
                self.note("refused")
                log.debug("connection from %s answered 503: no room for %.1f s", connection.peer(), now - since)
                self._hand_over(connection.refuse)
            else:
                break
        self._schedule(now)

    def _hand_over(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:  # one connection's failure stops no other
            log.exception("a connection waiting at the cap could not be let in or answered")

    def _make_room(self, now: float) -> bool:
        """Closes the connection whose reader has taken nothing longest, if for ``STUCK_GRACE``, else
        the one idle longest, if for ``IDLE_GRACE``; whether one was closed."""
        for _ in range(REFRESH_LIMIT):
            head = next(iter(self.stuck.items()), None)
            if head is None or now - head[1] < STUCK_GRACE:
                break
            stuck, since = head
            if stuck.write_progress(now) > since:  # its reader took something since: back of the line
                self.stuck[stuck] = now
                self.stuck.move_to_end(stuck)
                continue
            self.release(stuck)
            stuck.abort()  # what its reader has not taken is dropped
            self.note("stuck made room")
            log.debug(
                "connection from %s closed for room: its reader took nothing for %.2f s", stuck.peer(), now - since
            )
            return True
        idle = next(iter(self.idle.items()), None)
        if idle is not None and now - idle[1] >= IDLE_GRACE:
            # Last: an idle kept-alive connection is a client that reads, and closing it races with
            # its next request.
            self.release(idle[0])  # counted out now: its close is reported later
            idle[0].close_idle()
            self.note("made room")
            log.debug("connection from %s closed for room: idle for %.2f s", idle[0].peer(), now - idle[1])
            return True
        return False

    def _count_in(self, connection: GuardedHttpTools, now: float) -> None:
        self.open += 1
        connection.counted = True
        self.idle[connection] = now

    def _schedule(self, now: float) -> None:
        """The next look for waiting connections: when the first of them has waited ``admit_wait``,
        or the oldest candidate to make room becomes old enough, if sooner."""
        if not self.waiting:
            if self._wake is not None:
                self._wake.cancel()
                self._wake = None
            return
        when = next(iter(self.waiting.values())) + self.limits.admit_wait
        stuck = next(iter(self.stuck.values()), None)
        if stuck is not None:
            when = min(when, stuck + STUCK_GRACE)
        idle = next(iter(self.idle.values()), None)
        if idle is not None:
            when = min(when, idle + IDLE_GRACE)
        self._wake_at(max(when, now + 0.01))  # (a head whose progress was not looked at yet: soon)

    def _wake_at(self, when: float) -> None:
        if self._wake is not None:
            if self._wake_when <= when:
                return  # that look sets the next one
            self._wake.cancel()
        self._wake_when = when
        self._wake = asyncio.get_running_loop().call_later(max(0.0, when - self.clock()), self._woken)

    def _woken(self) -> None:
        self._wake = None
        self.pump(self.clock())

    def release(self, connection: GuardedHttpTools) -> None:
        if connection.counted:
            connection.counted = False
            self.open -= 1
            self._closed += 1
            if self._closed >= TRIM_AFTER and self._trim_timer is None and self.trim is not None:
                self._trim_timer = asyncio.get_running_loop().call_later(TRIM_DELAY, self._trim_heap)
            if self.waiting:  # room for the first of them
                self._wake_at(self.clock())
        self.idle.pop(connection, None)
        self.stuck.pop(connection, None)
        self.waiting.pop(connection, None)
        self.refusing.discard(connection)

    def _trim_heap(self) -> None:
        self._trim_timer = None
        self._closed = 0
        if self.trim is not None:
            asyncio.get_running_loop().run_in_executor(None, self.trim)

    def busy(self, connection: GuardedHttpTools) -> None:
        self.idle.pop(connection, None)

    def idle_again(self, connection: GuardedHttpTools, now: float) -> None:
        if connection.counted:
            self.idle[connection] = now
            self.idle.move_to_end(connection)
            if self.waiting:
                self._wake_at(now + IDLE_GRACE)

    def writing_stuck(self, connection: GuardedHttpTools, now: float) -> None:
        """Its transport paused: what it was sent waits for its reader (since ``now``)."""
        if connection.counted:
            self.stuck[connection] = now
            self.stuck.move_to_end(connection)
            if self.waiting:
                self._wake_at(now + STUCK_GRACE)

    def writing_again(self, connection: GuardedHttpTools) -> None:
        self.stuck.pop(connection, None)

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
        longest, self.longest_wait = self.longest_wait, 0.0
        limits = self.limits
        cap = f"at the cap of {limits.max_connections} open connections"
        parts = []
        if counts["waited"]:
            parts.append(f"{counts['waited']} waited for room {cap} (at most {longest:.1f} s)")
        if counts["refused"]:
            parts.append(f"{counts['refused']} refused {cap} (503: no room within {limits.admit_wait:g} s)")
        if counts["reset"]:
            parts.append(f"{counts['reset']} reset {cap} ({self.spare} already waiting)")
        if counts["made room"]:
            parts.append(f"{counts['made room']} idle ones closed to make room at the cap")
        if counts["stuck made room"]:
            parts.append(f"{counts['stuck made room']} whose reader took nothing closed to make room at the cap")
        if counts["head"]:
            parts.append(f"{counts['head']} closed without a complete request head in {limits.header_timeout:g} s")
        if counts["body"]:
            parts.append(f"{counts['body']} closed with a request body stalled for {limits.body_timeout:g} s")
        if counts["write"]:
            parts.append(f"{counts['write']} closed whose reader took nothing for {limits.write_timeout:g} s")
        if counts["held"]:
            parts.append(
                f"{counts['held']} closed with over {HELD_LIMIT // 1024} KiB of requests pipelined behind "
                f"{limits.pipeline_limit} unanswered ones"
            )
        if parts:
            settings = "ACP_BRIDGE_MAX_CONNECTIONS, ..._HEADER_TIMEOUT, ..._BODY_TIMEOUT, ..._WRITE_TIMEOUT"
            log.warning("connections: %s (%s)", "; ".join(parts), settings)


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines, bounds and cap above (``protocol_class``
    gives it its ``Connections`` as ``guard``)."""

    guard: ClassVar[Connections]
    admitted = False  # counted in: requests are read and answered
    waiting = False  # at the cap, unread, until ``enter`` or ``refuse``
    refusing = False  # answered 503, what it sends read and dropped until it closes
    counted = False
    head_deadline: asyncio.TimerHandle | None = None
    body_deadline: asyncio.TimerHandle | None = None
    linger_deadline: asyncio.TimerHandle | None = None
    body_seen = 0.0
    body_done = True
    # Writes: the deadline's timer, when the buffer last shrank, its size then.
    write_deadline: asyncio.TimerHandle | None = None
    write_seen = 0.0
    write_left = 0
    # What the client sent beyond ``pipeline_limit`` waiting requests (or while it waited for room),
    # not parsed yet.
    held = b""
    # The running answer has been written, not yet taken by the reader: the next pipelined request
    # starts when it has.
    complete_pending = False

    # ---- the connection ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport  # (read by the guard's log lines before uvicorn sets it)
        admission = self.guard.admit(self, self.loop.time())
        if admission == "reset":
            transport.abort()  # at once, no lingering descriptor
            return
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        if admission == "open":
            self._open()
        else:
            self.waiting = True
            # Its request waits in the kernel until it is let in. (uvloop starts reading after
            # ``connection_made`` all the same: what its first read brings is kept, see data_received.)
            self.flow.pause_reading()

    def _open(self) -> None:
        self.admitted = True
        limit_unsent(self.transport)
        self._arm_head()

    def enter(self) -> None:
        """Let in after waiting at the cap (counted in by the guard)."""
        if not self.waiting:
            return
        self.waiting = False
        self._open()
        # Reading resumes first (nothing arrives before this returns): a pause that parsing what
        # came before reading stopped calls for (pipelined requests held, a large body) then stays.
        if not self.transport.is_closing():
            self.flow.resume_reading()
        if self.held:
            held, self.held = self.held, b""
            self._parse(held)

    def refuse(self) -> None:
        """No room at the cap in time: 503, then the end of the server's writes; what the client
        still sends is read and dropped until it closes, ``LINGER`` seconds at most."""
        if not self.waiting:
            return
        self.waiting = False
        self.refusing = True
        self.held = b""
        transport = self.transport
        transport.write(self.guard.refusal)
        if isinstance(transport, CoalescingTransport):
            transport.flush()  # before the end of the writes, which is not deferred
        if transport.can_write_eof():
            transport.write_eof()
        self.flow.resume_reading()
        self.linger_deadline = self.loop.call_later(LINGER, self.transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        if not (self.admitted or self.waiting or self.refusing):
            return  # reset at the cap: uvicorn never saw it
        self.admitted = self.waiting = self.refusing = False
        self.guard.release(self)
        self._cancel_deadlines()
        self.held = b""
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.drop()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            if self.held:  # reading was resumed (a request's receive) while requests wait: keep it too
                self._hold(self.held + data)
                return
            self._parse(data)
        elif self.waiting:  # the one read uvloop makes despite the pause: kept, and reading stops
            self.held += data
            self.transport.pause_reading()  # (``flow`` says paused already)
        # refusing: dropped

    def _hold(self, data: bytes) -> None:
        self.flow.pause_reading()
        if len(data) > HELD_LIMIT:
            self.held = b""
            self.guard.note("held")
            self.transport.abort()
            return
        self.held = data

    def _parse(self, data: bytes) -> None:
        """Parse ``data``, one request head at a time (split after each blank line) so that parsing
        stops once ``pipeline_limit`` requests wait; the rest is held, unparsed."""
        limit = self.guard.limits.pipeline_limit
        start, end = 0, len(data)
        while start < end:
            if len(self.pipeline) >= limit:
                self._hold(data[start:])
                return
            cut = data.find(b"\r\n\r\n", start)
            stop = end if cut < 0 else cut + 4
            super().data_received(data if start == 0 and stop == end else data[start:stop])
            if not self.admitted or self.transport.is_closing():
                return
            start = stop

    def close_idle(self) -> None:
        """Closed to make room for a new connection."""
        if self.cycle is None:  # no request was ever started: nothing to say goodbye to
            self.transport.abort()
        else:
            self.transport.close()

    def abort(self) -> None:
        if self.admitted:
            self.transport.abort()

    def peer(self) -> str:
        """The client's address, for the log."""
        try:
            host, port = self.transport.get_extra_info("peername")[:2]
        except (AttributeError, TypeError, ValueError):
            return "?"
        return f"{host}:{port}"

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

    # ---- writes -------------------------------------------------------------------------------
    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark (or, after an answer, holds anything):
        the write deadline runs."""
        super().pause_writing()
        if not self.admitted:
            return
        now = self.write_seen = self.loop.time()
        self.write_left = self.transport.get_write_buffer_size()
        self.guard.writing_stuck(self, now)
        if self.write_deadline is None:
            self.write_deadline = self.loop.call_later(self.guard.limits.write_timeout, self._write_check)

    def resume_writing(self) -> None:
        """The buffer is down to its low-water mark (all of it, after an answer)."""
        super().resume_writing()
        if not self.admitted:
            return
        self.guard.writing_again(self)
        if self.complete_pending:
            self.transport.set_write_buffer_limits()  # back to the defaults while an answer streams
            self.complete_pending = False
            self._response_complete()

    def write_progress(self, now: float) -> float:
        """When its reader last took something of what waits to be written (looked at ``now``)."""
        if self.admitted:
            left = self.transport.get_write_buffer_size()
            if left < self.write_left:  # the reader took some: progress
                self.write_left = left
                self.write_seen = now
        return self.write_seen

    def _write_check(self) -> None:
        """One timer per stuck write: looked at every ``write_timeout``; the connection is aborted
        when its buffer did not shrink since the last look."""
        self.write_deadline = None
        if not self.admitted or not self.flow.write_paused:
            return
        now = self.loop.time()
        seen = self.write_seen
        if self.write_progress(now) > seen:
            self.guard.writing_stuck(self, now)  # (to the back of the line to make room)
        due = self.write_seen + self.guard.limits.write_timeout
        if due <= now:
            self.guard.note("write")
            self.transport.abort()
            return
        self.write_deadline = self.loop.call_at(due, self._write_check)

    # ---- between requests ---------------------------------------------------------------------
    def on_response_complete(self) -> None:
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.flush()  # the answer's end goes out now, and the buffer below is the socket's
        if self.admitted and not self.transport.is_closing() and self.transport.get_write_buffer_size():
            # What is left of the answer goes before anything else: the transport pauses until all
            # of it has (high-water mark 0; the write deadline runs meanwhile), and the next
            # pipelined request waits for that (``resume_writing``). So a reader that never reads
            # holds one answer at most, and is never idle while it does.
            self.complete_pending = True
            self.transport.set_write_buffer_limits(high=0)
            if self.flow.write_paused:
                return
            self.complete_pending = False  # (a transport that did not pause: nothing waits)
            self.transport.set_write_buffer_limits()
        self._response_complete()

    def _response_complete(self) -> None:
        super().on_response_complete()
        if not self.admitted or self.transport.is_closing():
            return
        if self.held:  # uvicorn resumed reading: parse what was held, as far as the bound allows
            held, self.held = self.held, b""
            self._parse(held)
        if not self.pipeline and self.cycle is not None and self.cycle.response_complete:
            self.guard.idle_again(self, self.loop.time())

    def _cancel_deadlines(self) -> None:
        for handle in (self.head_deadline, self.body_deadline, self.write_deadline, self.linger_deadline):
            if handle is not None:
                handle.cancel()
        self.head_deadline = self.body_deadline = self.write_deadline = self.linger_deadline = None


def protocol_class(connections: Connections) -> type[GuardedHttpTools]:
    """The class uvicorn is given as ``http``: ``GuardedHttpTools`` bound to ``connections``."""
    return type("BridgeHttpProtocol", (GuardedHttpTools,), {"guard": connections})
