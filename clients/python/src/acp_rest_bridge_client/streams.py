"""Event streams: what the clients' stream methods return, stopping them from any thread or task, and
resuming one after a drop.

A stream is stopped by shutting down the socket its response is read from: a read blocked on it,
in whatever thread or task, returns at once, which neither closing the response from another thread
nor cancelling can promise. The socket is the connection's, as httpx gives it
(``response.extensions["network_stream"].get_extra_info("socket")``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from types import TracebackType
from typing import Protocol, runtime_checkable

import httpx

from .errors import TransportError
from .models import UniversalEvent

# What a dropped connection raises: reset, cut mid-frame or a read that timed out (httpx's errors,
# while the answer is read), refused or timed out (the client's own, while connecting).
RECONNECT_ERRORS = (httpx.TransportError, TransportError)

# The events of a stream, as the clients' generators yield them.
AsyncEvents = AsyncGenerator[UniversalEvent, None]
Events = Generator[UniversalEvent, None, None]


@runtime_checkable
class Shutdown(Protocol):
    """A socket (asyncio gives a ``TransportSocket`` in place of the ``socket.socket``)."""

    def shutdown(self, how: int, /) -> None: ...


class StreamStop:
    """Whether a stream was asked to stop, and how to wake whatever waits in it. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._socket: Shutdown | None = None
        self._wakers: list[Callable[[], None]] = []

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

    def close(self) -> None:
        """Stops the stream: the socket being read is shut down, a pause between reconnects ends."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            sock, wakers = self._socket, list(self._wakers)
        if sock is not None:
            _shut_down(sock)
        for wake in wakers:
            wake()

    def attach(self, response: httpx.Response) -> None:
        """The response now read; shut down at once when the stream was stopped meanwhile."""
        network_stream = response.extensions.get("network_stream")
        sock = network_stream.get_extra_info("socket") if network_stream is not None else None
        if not isinstance(sock, Shutdown):  # a transport that is no socket (a test's mock transport)
            return
        with self._lock:
            stopped = self._stopped.is_set()
            if not stopped:
                self._socket = sock
        if stopped:
            _shut_down(sock)

    def detach(self) -> None:
        with self._lock:
            self._socket = None

    def sleep(self, delay: float) -> bool:
        """Waits ``delay`` seconds, less when the stream is stopped; returns whether it was."""
        return self._stopped.wait(delay)

    async def async_sleep(self, delay: float) -> bool:
        """``sleep`` for a coroutine: the loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits any more
                loop.call_soon_threadsafe(resolve)

        with self._lock:
            if self._stopped.is_set():
                return True
            self._wakers.append(wake)
        try:
            await asyncio.wait([woken], timeout=delay)
        finally:
            with self._lock:
                self._wakers.remove(wake)
        return self.closed


def _shut_down(sock: Shutdown) -> None:
    with contextlib.suppress(OSError):  # already closed or never connected
        sock.shutdown(socket.SHUT_RDWR)


class EventStream(Iterator[UniversalEvent]):
    """The events of a stream, as they arrive. ``close()`` ends it, from any thread: an iteration
    waiting for an event (in this thread or another) ends at once, without an error. Leaving a
    ``with`` block closes it; so does closing the client."""

    def __init__(self, events: Callable[[StreamStop], Events]) -> None:
        self._stop = StreamStop()
        self._events = events(self._stop)
        self._busy = threading.Lock()  # held while an iteration runs the generator

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> UniversalEvent:
        with self._busy:
            if self._stop.closed:
                self._events.close()
                raise StopIteration
            return next(self._events)

    @property
    def closed(self) -> bool:
        return self._stop.closed

    def close(self) -> None:
        """Ends the stream and returns at once; its connection is released by the iteration that
        was waiting, or here when none was."""
        self._stop.close()
        if self._busy.acquire(blocking=False):
            try:
                self._events.close()
            finally:
                self._busy.release()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncEventStream(AsyncIterator[UniversalEvent]):
    """The events of a stream, as they arrive, for ``async for``. ``close()`` ends it, from any task
    or thread, and returns at once: an iteration waiting for an event ends without an error.
    ``await aclose()`` (or leaving ``async with``) also waits until its connection is released;
    closing the client closes it too."""

    def __init__(self, events: Callable[[StreamStop], AsyncEvents]) -> None:
        self._stop = StreamStop()
        self._events = events(self._stop)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False  # an iteration is inside the generator
        self._finishing: asyncio.Task[None] | None = None

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> UniversalEvent:
        if self._running:
            raise RuntimeError("the stream is already being iterated")
        if self._stop.closed:
            await self._finish()
            raise StopAsyncIteration
        self._loop = asyncio.get_running_loop()
        self._running = True
        try:
            return await self._events.__anext__()
        finally:
            self._running = False

    @property
    def closed(self) -> bool:
        return self._stop.closed

    def close(self) -> None:
        """Ends the stream and returns at once, from any task or thread."""
        self._stop.close()
        loop = self._loop
        if loop is not None and not self._running:
            # Nothing is iterating: the connection is released by a task on the stream's loop.
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(self._schedule_finish)

    async def aclose(self) -> None:
        """Ends the stream and waits until its connection is released."""
        self._stop.close()
        if not self._running:
            await self._finish()

    def _schedule_finish(self) -> None:
        if not self._running and self._finishing is None:
            self._finishing = asyncio.ensure_future(self._events.aclose())

    async def _finish(self) -> None:
        if self._finishing is None:
            self._finishing = asyncio.ensure_future(self._events.aclose())
        await self._finishing

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Resume:
    """The last sequence a stream yielded and the reconnects tried since its last event."""

    def __init__(self, last: int, attempts: int, delay: float) -> None:
        self.last = last
        self.attempts = attempts
        self.delay = delay
        self.failures = 0
        self.connected = False  # once connected, a failed connect is a drop to retry
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
