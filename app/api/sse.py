"""Server-sent event streams of a session log, as plain ASGI responses.

A stream is one coroutine that writes the batches of a log subscription. Beside it: one timer set
for its next deadline (the keep-alive comment after a silence, the send timeout of a write), one
task that notices the client leaving (a turn's stream, which most often ends within milliseconds,
starts it only once it has been open for ``WATCH_AFTER`` seconds), and one watcher for the whole
process that ends every stream when the server begins to stop. (A timeout scope per wait and per
write, a timer made and cancelled twice per batch, cost ~8 us more per batch; a general SSE response
with a task group, a ping task and a cancel scope per write cost ~0.5 ms per ``messages/stream``.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import Response

from app.api.middleware import ABORT_EXTENSION
from app.errors import StorageUnavailable
from app.events.envelope import dumps
from app.events.log import SessionEventLog, Subscription
from app.events.model import SESSION_ENDED, TERMINAL_TYPES, TURN_STARTED
from app.events.stored import StoredEvent

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("acp_rest_bridge.sse")

# `text/event-stream` without a charset parameter, as legacy sent it; no-cache and no proxy buffering.
START_HEADERS = [
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
]
KEEPALIVE = b": keep-alive\n\n"
_END = {"type": "http.response.body", "body": b"", "more_body": False}
# A turn's stream starts watching for its client leaving after this many seconds: most end sooner,
# and a task per stream costs more than the rest of a short one.
WATCH_AFTER = 0.5
# A stream whose events cannot be read now (a fleet's database that went away) keeps its place and
# waits for them, trying again after STORAGE_RETRY seconds, doubled up to STORAGE_RETRY_MAX, with
# keep-alives meanwhile. After STORAGE_WAIT seconds of failed reads its body ends, complete: the
# client resumes after the last ``id:`` it got (``offset``, ``Last-Event-ID``), with no gap.
STORAGE_RETRY = 0.1
STORAGE_RETRY_MAX = 2.0
STORAGE_WAIT = 300.0


def frames(events: list[StoredEvent], include_raw: bool) -> bytes:
    """SSE frames ``id: <sequence>`` + ``data: <compact JSON>``; legacy parsers keep only the data
    line, and the JSON never holds a raw newline (JSON escapes them), so one data line suffices."""
    if not include_raw:
        return b"".join([e.frame for e in events])
    return "".join([f"id: {e.sequence}\ndata: {e.render(True)}\n\n" for e in events]).encode()


class _DroppedReaders(logging.Filter):
    """uvicorn reports a response that ends unfinished as an ERROR; for a reader dropped on purpose
    the bridge's own warning says what happened, so that one line is left out."""

    MESSAGE = "ASGI callable returned without completing response."

    def __init__(self) -> None:
        super().__init__()
        self.expected = 0

    def expect(self) -> None:
        logger = logging.getLogger("uvicorn.error")
        if self not in logger.filters:
            logger.addFilter(self)
        self.expected += 1

    def filter(self, record: logging.LogRecord) -> bool:
        if self.expected and record.getMessage() == self.MESSAGE:
            self.expected -= 1
            return False
        return True


_dropped_readers = _DroppedReaders()


class EventStream(Response):
    """The events after ``after`` as SSE, then live ones.

    ``stop_at_terminal``: the stream ends after the first event of TERMINAL_TYPES (messages/stream).
    ``turn_id``: the stream is that turn's: what comes before its turn.started (the end of a turn
    still running when the message was queued) is skipped, unless the session ends first.
    When the server stops, the stream ends properly (a complete chunked body) rather than being cut.

    One timer per stream, set for the next deadline: a wait for events that lasts ``keepalive``
    seconds is woken to write a keep-alive comment; a write that lasts ``send_timeout`` seconds
    expires the stream's one ``asyncio.timeout`` scope, and the reader is dropped.
    """

    _loop: asyncio.AbstractEventLoop  # set when the stream starts

    def __init__(
        self,
        log: SessionEventLog,
        after: int,
        include_raw: bool,
        *,
        stop_at_terminal: bool,
        turn_id: str | None = None,
        keepalive: float = 15.0,
        send_timeout: float | None = 30.0,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        # A Response for the framework (no body, no background task); it answers by itself.
        self.status_code = 200
        self.background = None
        self.log = log
        self.after = after  # the cursor: everything after it is sent, whenever the stream starts
        self.include_raw = include_raw
        self.stop_at_terminal = stop_at_terminal
        self.own_start = None if turn_id is None else f'"turn_id":{dumps(turn_id)}'
        self.keepalive = keepalive if keepalive > 0 else None
        self.send_timeout = send_timeout or None
        self.stopping = stopping  # whether the server has begun to stop
        self.sub: Subscription | None = None
        self._writing = False
        self._since = 0.0  # loop time when the current wait or write began
        self._scope: asyncio.Timeout | None = None  # expired to drop the reader
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._receive: Receive | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._unreadable_since: float | None = None  # loop time of the first failed read in a row
        self._retry = STORAGE_RETRY

    # ---- the batches --------------------------------------------------------------------------
    def _select(self, batch: list[StoredEvent]) -> tuple[list[StoredEvent], bool]:
        """What of the batch goes out, and whether the stream ends after it."""
        if self.own_start is not None:
            for index, event in enumerate(batch):
                if event.type == TURN_STARTED and self.own_start in event.json:
                    batch = batch[index:]
                    self.own_start = None
                    break
                if event.type == SESSION_ENDED:
                    return [event], True
            else:
                return [], False
        if self.stop_at_terminal:
            for index, event in enumerate(batch):
                if event.type in TERMINAL_TYPES:
                    return batch[: index + 1], True
        return batch, False

    async def _write_all(self, sub: Subscription, send: Send) -> None:
        await self._send(send, {"type": "http.response.start", "status": 200, "headers": list(START_HEADERS)})
        while True:
            self._since = self._loop.time()
            batch = await self._next_batch(sub)
            if batch is None:  # the store stayed unreadable: a complete end, resumed after its last id
                await self._send(send, _END)
                return
            if not batch:
                if sub.closed:  # the client left or the server is stopping
                    await self._send(send, _END)
                    return
                # Woken by the timer: the stream has been silent for the keep-alive period.
                await self._send(send, {"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                continue
            batch, done = self._select(batch)
            if done:  # the last frames and the end of the body in one write
                body = frames(batch, self.include_raw)
                await self._send(send, {"type": "http.response.body", "body": body, "more_body": False})
                return
            if batch:
                body = frames(batch, self.include_raw)
                await self._send(send, {"type": "http.response.body", "body": body, "more_body": True})

    async def _next_batch(self, sub: Subscription) -> list[StoredEvent] | None:
        """``sub.next_batch()``; while the store cannot be read, tried again (the cursor stays where
        it is, so nothing is skipped or sent twice). [] when a keep-alive is due meanwhile or the
        stream is closed; None once reads have failed for ``STORAGE_WAIT`` seconds."""
        while True:
            try:
                batch = await sub.next_batch()
            except StorageUnavailable as exc:
                now = self._loop.time()
                if self._unreadable_since is None:
                    self._unreadable_since = now
                    log.warning("SSE reader of %s waits for the store: %s", self.log.session_id, exc)
                elif now - self._unreadable_since >= STORAGE_WAIT:
                    log.warning(
                        "SSE reader of %s ended: the store could not be read for %ss (the client resumes"
                        " after its last event id)",
                        self.log.session_id,
                        STORAGE_WAIT,
                    )
                    return None
                await asyncio.sleep(self._retry)
                self._retry = min(self._retry * 2, STORAGE_RETRY_MAX)
                if sub.closed or (self.keepalive is not None and self._loop.time() - self._since >= self.keepalive):
                    return []
                continue
            if self._unreadable_since is not None:
                log.info("SSE reader of %s reads the store again", self.log.session_id)
                self._unreadable_since, self._retry = None, STORAGE_RETRY
            return batch

    async def _send(self, send: Send, message: Message) -> None:
        self._writing = True
        self._since = self._loop.time()
        try:
            await send(message)
        finally:
            self._writing = False

    # ---- ASGI ---------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = self._loop = asyncio.get_running_loop()
        sub = self.sub = self.log.subscribe(self.after)
        self._receive = receive
        watch_later = None
        if self.stop_at_terminal:
            watch_later = loop.call_later(WATCH_AFTER, self._watch_client)
        else:
            self._watch_client()
        _streams.add(self)
        self._since = loop.time()
        deadline = self._scope = asyncio.timeout(None)
        self._check()
        try:
            async with deadline:
                await self._write_all(sub, send)
        except TimeoutError:
            if not deadline.expired():
                raise
            if not self._stopping:
                client = scope.get("client")
                log.warning(
                    "SSE reader %s dropped: it accepted no data for %ss",
                    f"{client[0]}:{client[1]}" if client else "",
                    self.send_timeout,
                )
            abort = (scope.get("extensions") or {}).get(ABORT_EXTENSION)
            if callable(abort):
                # Closed at once: a plain close would wait for the reader to take what is queued.
                abort()
            else:
                # Returning unfinished makes the server close the connection.
                _dropped_readers.expect()
        finally:
            self._scope = None
            if self._timer is not None:
                self._timer.cancel()
            if watch_later is not None:
                watch_later.cancel()
            if self._watcher is not None:
                self._watcher.cancel()
            _streams.discard(self)
            sub.close()

    # ---- the timer ----------------------------------------------------------------------------
    def _check(self) -> None:
        """A write past the send timeout drops the reader; a wait past the keep-alive period is
        woken. Then the timer is set for the deadline of what the stream does now."""
        now = self._loop.time()
        limit = self.send_timeout if self._writing else self.keepalive
        if limit is not None and now - self._since >= limit:
            if self._writing:
                self._drop()
                return
            if self.sub is not None:
                self.sub.wake()
        # What the stream does next (a wait, a write) has its deadline at least this far from its
        # start: looking again no later than that, and then at that deadline, is never late.
        step = min(p for p in (self.keepalive, self.send_timeout, 3600.0) if p is not None)
        due = self._since + limit if limit is not None and self._since + limit > now else now + step
        self._timer = self._loop.call_at(min(due, now + step), self._check)

    def _drop(self) -> None:
        scope = self._scope
        if scope is not None and not scope.expired():
            scope.reschedule(self._loop.time())  # the stream's task ends with TimeoutError

    def _watch_client(self) -> None:
        """Start the task that notices the client leaving."""
        if self._watcher is None and self._receive is not None and self.sub is not None:
            self._watcher = self._loop.create_task(self._watch_disconnect(self._receive, self.sub))

    async def _watch_disconnect(self, receive: Receive, sub: Subscription) -> None:
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception:  # a receive that fails has no client behind it either
            log.debug("SSE receive failed", exc_info=True)
        sub.close()  # wakes the stream, which ends

    def stop(self) -> None:
        """The server is stopping: end the stream (at once if it is stuck writing)."""
        self._stopping = True
        if self._writing:
            self._drop()
        elif self.sub is not None:
            self.sub.close()


class _OpenStreams:
    """Every open stream of the process, ended when the server begins to stop.

    uvicorn waits for open responses to finish before it stops, and tells an application nothing
    before that; its server's public ``should_exit`` says whether it is stopping (each stream's
    ``stopping``). One watcher looks at it a few times a second while streams are open.
    """

    INTERVAL = 0.25

    def __init__(self) -> None:
        self.open: set[EventStream] = set()
        self._watcher: asyncio.Task[None] | None = None

    def add(self, stream: EventStream) -> None:
        self.open.add(stream)
        watcher = self._watcher
        if watcher is None or watcher.done() or watcher.get_loop() is not asyncio.get_running_loop():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def discard(self, stream: EventStream) -> None:
        self.open.discard(stream)

    async def _watch(self) -> None:
        while self.open:
            for stream in tuple(self.open):
                if stream.stopping():
                    stream.stop()
            await asyncio.sleep(self.INTERVAL)


_streams = _OpenStreams()
