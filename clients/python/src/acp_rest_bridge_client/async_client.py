"""``AsyncSandboxAgent``: the client, for asyncio.

``client.py`` (``SandboxAgent``) is generated from this file by ``clients/python/generate_sync.py``:
change this one, then run that script (a test fails when the two differ).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from types import TracebackType
from typing import TypeVar

import httpx

from . import calls
from .calls import DEFAULT_TIMEOUT, TURN_STREAM_END
from .errors import ConnectionLostError, ProtocolError, TransportError, error_for, transport_error
from .models import (
    AgentInstallRequest,
    AgentListResponse,
    AgentModelsResponse,
    AgentModesResponse,
    CreateSessionRequest,
    CreateSessionResponse,
    EventsResponse,
    FsActionResponse,
    FsEntry,
    FsMoveRequest,
    FsMoveResponse,
    FsStat,
    FsUploadBatchResponse,
    FsWriteResponse,
    HealthResponse,
    MessageRequest,
    PermissionReply,
    QuestionReplyRequest,
    SessionListResponse,
    UniversalEvent,
)
from .spawn import BridgeProcess, spawn_bridge
from .sse import SseDecoder
from .streams import RECONNECT_ERRORS, AsyncEvents, AsyncEventStream, Resume, StreamStop

T = TypeVar("T")
Until = Callable[[UniversalEvent], bool]


def ends_turn(event: UniversalEvent, turn_id: str | None) -> bool:
    """Whether the event ends the turn ``turn_id`` (any turn when None): its ``turn.ended``, or the
    session's end."""
    if event["type"] == "session.ended":
        return True
    if event["type"] != "turn.ended":
        return False
    return turn_id is None or event["data"].get("turn_id", turn_id) == turn_id


def ends_turn_stream(event: UniversalEvent) -> bool:
    """Whether the server's turn stream closes after the event (legacy: its first terminal event)."""
    return event["type"] in TURN_STREAM_END


def client_error(exc: httpx.TransportError | TransportError) -> TransportError:
    """The client's error for a connection failure, raised ``from`` the error unless it is one."""
    return exc if isinstance(exc, TransportError) else transport_error(exc)


class AsyncSandboxAgent:
    """A client of one server, for asyncio. ``AsyncSandboxAgent(base_url, token=...)`` connects to a
    running server; ``await AsyncSandboxAgent.start()`` runs one as a child process, stopped by
    ``close()``. Errors are ``SandboxAgentError`` subclasses, a server out of reach included."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._http.base_url = httpx.URL(self.base_url)
        self._http.headers.update(calls.headers(token, headers))
        self._process: BridgeProcess | None = None
        self._streams: weakref.WeakSet[AsyncEventStream] = weakref.WeakSet()
        self._closed = False

    @classmethod
    async def start(
        cls,
        *,
        binary: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        log: str = "inherit",
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncSandboxAgent:
        """Runs ``acp-rest-bridge server`` on a free port (``port=0``) with a random token, waits until
        it is healthy and returns a client of it; ``close()`` stops it. ``binary``: the command, else
        ``$ACP_REST_BRIDGE_BIN``, else ``acp-rest-bridge`` on PATH, else the one beside this Python (its
        venv's). ``log``: ``inherit``, ``silent``."""
        process = await asyncio.to_thread(
            spawn_bridge, binary=binary, host=host, port=port, token=token, args=args, env=env, log=log, timeout=timeout
        )
        client = cls(process.base_url, token=process.token, headers=headers)
        client._process = process
        return client

    @property
    def process(self) -> BridgeProcess | None:
        """The server process ``start()`` runs, if any."""
        return self._process

    # ---- plumbing -----------------------------------------------------------------------------
    async def _exchange(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        try:
            return await self._http.send(request, stream=stream)
        except httpx.RequestError as exc:
            raise transport_error(exc) from exc

    async def _send(self, call: calls.Call[T]) -> T:
        request = call.request(self._http)
        response = await self._exchange(request)
        if response.is_error:
            raise error_for(response)
        try:
            return call.read(response)
        except ValueError as exc:
            raise ProtocolError(f"{request.method} {request.url}: the answer is not JSON: {exc}", request) from exc

    @asynccontextmanager
    async def _stream(self, request: httpx.Request, stop: StreamStop | None = None) -> AsyncIterator[httpx.Response]:
        response = await self._exchange(request, stream=True)
        try:
            if response.is_error:
                try:
                    await response.aread()
                except httpx.RequestError as exc:
                    raise transport_error(exc) from exc
                raise error_for(response)
            if stop is not None:
                stop.attach(response)
            yield response
        finally:
            if stop is not None:
                stop.detach()
            try:
                await response.aclose()
            except httpx.RequestError:
                if stop is None or not stop.closed:
                    raise

    def _event_stream(self, events: Callable[[StreamStop], AsyncEvents]) -> AsyncEventStream:
        stream = AsyncEventStream(events)
        self._streams.add(stream)
        if self._closed:
            stream.close()
        return stream

    async def close(self) -> None:
        """Closes the client's streams (an iteration waiting in another task or thread ends at once,
        without an error), its connections, and stops the server ``start()`` ran."""
        self._closed = True
        for stream in list(self._streams):
            stream.close()
        if self._owns_http:
            await self._http.aclose()
        if self._process is not None:
            process, self._process = self._process, None
            await asyncio.to_thread(process.stop)

    dispose = close

    async def __aenter__(self) -> AsyncSandboxAgent:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- meta and agents ------------------------------------------------------------------------
    async def get_health(self) -> HealthResponse:
        return await self._send(calls.get_health())

    async def list_agents(self) -> AgentListResponse:
        return await self._send(calls.list_agents())

    async def install_agent(self, agent: str, request: AgentInstallRequest | None = None) -> None:
        await self._send(calls.install_agent(agent, request))

    async def get_agent_modes(self, agent: str) -> AgentModesResponse:
        return await self._send(calls.get_agent_modes(agent))

    async def get_agent_models(self, agent: str) -> AgentModelsResponse:
        return await self._send(calls.get_agent_models(agent))

    # ---- sessions -------------------------------------------------------------------------------
    async def create_session(self, session_id: str, request: CreateSessionRequest) -> CreateSessionResponse:
        return await self._send(calls.create_session(session_id, request))

    async def list_sessions(self) -> SessionListResponse:
        return await self._send(calls.list_sessions())

    async def post_message(self, session_id: str, request: MessageRequest | str) -> None:
        """Sends a message (a ``MessageRequest`` or its text); the turn runs in the background."""
        await self._send(calls.post_message(session_id, request))

    async def get_events(
        self, session_id: str, *, offset: int | None = None, limit: int | None = None, include_raw: bool | None = None
    ) -> EventsResponse:
        """One page of events with a sequence above ``offset``."""
        return await self._send(calls.get_events(session_id, offset, limit, include_raw))

    async def reply_question(self, session_id: str, question_id: str, request: QuestionReplyRequest) -> None:
        await self._send(calls.reply_question(session_id, question_id, request))

    async def reject_question(self, session_id: str, question_id: str) -> None:
        await self._send(calls.reject_question(session_id, question_id))

    async def reply_permission(self, session_id: str, permission_id: str, reply: PermissionReply) -> None:
        """Answers a permission request: ``once``, ``always`` or ``reject``."""
        await self._send(calls.reply_permission(session_id, permission_id, reply))

    async def terminate_session(self, session_id: str) -> None:
        await self._send(calls.terminate_session(session_id))

    # ---- streams --------------------------------------------------------------------------------
    def stream_events(
        self,
        session_id: str,
        *,
        offset: int | None = None,
        include_raw: bool | None = None,
        reconnect_attempts: int = 5,
        reconnect_delay: float = 0.5,
    ) -> AsyncEventStream:
        """The session's events with a sequence above ``offset``, then live ones, until ``close()``.
        After a drop the stream reconnects with ``Last-Event-ID`` (up to ``reconnect_attempts`` tries
        in a row, ``reconnect_delay`` doubling between them, then ``ConnectionLostError``) and yields
        no event twice and none missed."""

        def events(stop: StreamStop) -> AsyncEvents:
            resume = Resume(offset or 0, reconnect_attempts, reconnect_delay)
            return self._follow(stop, session_id, resume, include_raw, until=None)

        return self._event_stream(events)

    def stream_turn(
        self, session_id: str, request: MessageRequest | str, *, include_raw: bool | None = None
    ) -> AsyncEventStream:
        """Sends a message and yields every event of its turn until the turn ends (its ``turn.ended``)
        or the session does (``session.ended``). Permission and question requests are yielded like
        the rest: the turn goes on once they are answered (``reply_permission``, ``reply_question``),
        from the loop or from elsewhere. A turn its agent leaves without a ``turn.ended`` (legacy's
        mock ``permission`` script) keeps the stream open until ``close()``."""

        def events(stop: StreamStop) -> AsyncEvents:
            return self._whole_turn(stop, session_id, request, include_raw)

        return self._event_stream(events)

    def post_message_stream(
        self, session_id: str, request: MessageRequest | str, *, include_raw: bool | None = None
    ) -> AsyncEventStream:
        """Sends a message and yields the events of the server's turn stream, which ends after the
        turn's end or its first permission or question request, error or session end (the legacy
        SDK's ``postMessageStream`` and ``streamTurn``). A stream cut before its end is followed up on
        ``/events/sse`` from the last event seen."""

        def events(stop: StreamStop) -> AsyncEvents:
            return self._turn_stream(stop, session_id, request, include_raw)

        return self._event_stream(events)

    async def _whole_turn(
        self, stop: StreamStop, session_id: str, request: MessageRequest | str, include_raw: bool | None
    ) -> AsyncEvents:
        turn_id: str | None = None
        last: UniversalEvent | None = None
        async with aclosing(self._turn_stream(stop, session_id, request, include_raw)) as first:
            async for event in first:
                if event["type"] == "turn.started" and turn_id is None:
                    turn_id = event["data"].get("turn_id")
                last = event
                yield event
        if last is None or stop.closed or ends_turn(last, turn_id):
            return
        resume = Resume(last["sequence"], 5, 0.5)
        resume.connected = True
        async with aclosing(
            self._follow(stop, session_id, resume, include_raw, until=lambda event: ends_turn(event, turn_id))
        ) as rest:
            async for event in rest:
                yield event

    async def _turn_stream(
        self, stop: StreamStop, session_id: str, request: MessageRequest | str, include_raw: bool | None
    ) -> AsyncEvents:
        http_request = calls.stream_request(
            self._http,
            "POST",
            calls.session_path(session_id, "messages", "stream"),
            calls.query(include_raw=include_raw),
            {"Accept": "text/event-stream"},
            calls.message_body(request),
        )
        last: int | None = None
        try:
            async with self._stream(http_request, stop) as response:
                async with aclosing(self._read_events(response, stop)) as events:
                    async for event in events:
                        last = event["sequence"]
                        yield event
                        if event["type"] in TURN_STREAM_END:
                            return
        except RECONNECT_ERRORS as exc:
            if stop.closed:
                return
            if last is None:  # nothing was seen: whether the message was accepted is unknown
                error = client_error(exc)
                if error is exc:
                    raise
                raise error from exc
        if last is None or stop.closed:
            return
        resume = Resume(last, 5, 0.5)
        resume.connected = True
        async with aclosing(self._follow(stop, session_id, resume, include_raw, until=ends_turn_stream)) as rest:
            async for event in rest:
                yield event

    async def _follow(
        self, stop: StreamStop, session_id: str, resume: Resume, include_raw: bool | None, until: Until | None
    ) -> AsyncEvents:
        while not stop.closed:
            request = calls.stream_request(
                self._http,
                "GET",
                calls.session_path(session_id, "events", "sse"),
                calls.query(include_raw=include_raw),
                resume.headers(),
            )
            try:
                async with self._stream(request, stop) as response:
                    resume.connected = True
                    async with aclosing(self._read_events(response, stop)) as events:
                        async for event in events:
                            if resume.seen(event):
                                continue
                            yield event
                            if until is not None and until(event):
                                return
            except ProtocolError:
                raise  # an answer that is not what the contract says: no retry makes it so
            except RECONNECT_ERRORS as exc:
                if not resume.connected and not stop.closed:  # never connected: the server is not there
                    error = client_error(exc)
                    if error is exc:
                        raise
                    raise error from exc
                resume.dropped(exc)
            else:
                resume.dropped(None)
            if stop.closed:
                return
            delay = resume.next_delay()
            if delay is None:
                raise ConnectionLostError(resume.give_up_message()) from resume.cause
            if await stop.async_sleep(delay):
                return

    @staticmethod
    async def _read_events(response: httpx.Response, stop: StreamStop) -> AsyncEvents:
        decoder = SseDecoder()
        try:
            async for chunk in response.aiter_text():
                for frame in decoder.feed(chunk):
                    try:
                        event = frame.event()
                    except ValueError as exc:
                        raise ProtocolError(f"an SSE frame is not JSON: {frame.data[:200]!r}") from exc
                    yield event
        except httpx.TransportError:
            if not stop.closed:
                raise

    def get_events_sse(
        self, session_id: str, *, offset: int | None = None, include_raw: bool | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        """The raw ``/events/sse`` response: ``async with`` it for the ``httpx.Response``."""
        request = calls.stream_request(
            self._http,
            "GET",
            calls.session_path(session_id, "events", "sse"),
            calls.query(offset=offset, include_raw=include_raw),
            {"Accept": "text/event-stream"},
        )
        return self._stream(request)

    # ---- filesystem ------------------------------------------------------------------------------
    async def list_fs_entries(self, *, path: str | None = None, session_id: str | None = None) -> list[FsEntry]:
        return await self._send(calls.list_fs_entries(path, session_id))

    async def read_fs_file(self, path: str, *, session_id: str | None = None) -> bytes:
        return await self._send(calls.read_fs_file(path, session_id))

    async def write_fs_file(self, path: str, content: bytes, *, session_id: str | None = None) -> FsWriteResponse:
        return await self._send(calls.write_fs_file(path, content, session_id))

    async def delete_fs_entry(
        self, path: str, *, recursive: bool | None = None, session_id: str | None = None
    ) -> FsActionResponse:
        return await self._send(calls.delete_fs_entry(path, recursive, session_id))

    async def mkdir_fs(self, path: str, *, session_id: str | None = None) -> FsActionResponse:
        return await self._send(calls.mkdir_fs(path, session_id))

    async def move_fs(self, request: FsMoveRequest, *, session_id: str | None = None) -> FsMoveResponse:
        return await self._send(calls.move_fs(request, session_id))

    async def stat_fs(self, path: str, *, session_id: str | None = None) -> FsStat:
        return await self._send(calls.stat_fs(path, session_id))

    async def upload_fs_batch(
        self, archive: bytes, *, path: str | None = None, session_id: str | None = None
    ) -> FsUploadBatchResponse:
        """Unpacks a tar archive under ``path``."""
        return await self._send(calls.upload_fs_batch(archive, path, session_id))

    async def upload_directory(
        self, directory: str | os.PathLike[str], *, path: str | None = None, session_id: str | None = None
    ) -> FsUploadBatchResponse:
        """Uploads a local directory's contents under ``path``, as one tar archive."""
        archive = await asyncio.to_thread(calls.tar_directory, directory)
        return await self.upload_fs_batch(archive, path=path, session_id=session_id)
