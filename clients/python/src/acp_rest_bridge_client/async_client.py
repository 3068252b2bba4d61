"""``AsyncSandboxAgent``: the asyncio client; the same methods as ``SandboxAgent``, awaited."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TypeVar

import httpx

from . import calls
from .client import DEFAULT_TIMEOUT, STREAM_READ_TIMEOUT
from .errors import ConnectionLostError, error_for
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
from .sse import TURN_STREAM_END, SseDecoder
from .streams import RECONNECT_ERRORS, Resume

T = TypeVar("T")


class AsyncEventStream(AsyncIterator[UniversalEvent]):
    """The events of an SSE stream, as they arrive; ``await aclose()`` (or ``async with``) ends it."""

    def __init__(self, events: AsyncIterator[UniversalEvent]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> UniversalEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncSandboxAgent:
    """An asyncio client of one server; ``await AsyncSandboxAgent.start()`` runs one as a child process."""

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
        """As ``SandboxAgent.start``; the process is started and stopped off the event loop."""
        process = await asyncio.to_thread(
            spawn_bridge, binary=binary, host=host, port=port, token=token, args=args, env=env, log=log, timeout=timeout
        )
        client = cls(process.base_url, token=process.token, headers=headers)
        client._process = process
        return client

    @property
    def process(self) -> BridgeProcess | None:
        return self._process

    # ---- plumbing -----------------------------------------------------------------------------
    async def _send(self, call: calls.Call[T]) -> T:
        response = await self._http.send(call.request(self._http))
        if response.is_error:
            raise error_for(response)
        return call.read(response)

    @asynccontextmanager
    async def _stream(self, request: httpx.Request) -> AsyncIterator[httpx.Response]:
        response = await self._http.send(request, stream=True)
        try:
            if response.is_error:
                await response.aread()
                raise error_for(response)
            yield response
        finally:
            await response.aclose()

    async def close(self) -> None:
        """Closes the connections, and stops the server ``start()`` ran."""
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
        await self._send(calls.post_message(session_id, request))

    async def get_events(
        self, session_id: str, *, offset: int | None = None, limit: int | None = None, include_raw: bool | None = None
    ) -> EventsResponse:
        return await self._send(calls.get_events(session_id, offset, limit, include_raw))

    async def reply_question(self, session_id: str, question_id: str, request: QuestionReplyRequest) -> None:
        await self._send(calls.reply_question(session_id, question_id, request))

    async def reject_question(self, session_id: str, question_id: str) -> None:
        await self._send(calls.reject_question(session_id, question_id))

    async def reply_permission(self, session_id: str, permission_id: str, reply: PermissionReply) -> None:
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
        """As ``SandboxAgent.stream_events``: live events, resumed after a drop, none twice or missed."""
        resume = Resume(offset or 0, reconnect_attempts, reconnect_delay)
        return AsyncEventStream(self._follow(session_id, resume, include_raw, until=None))

    def stream_turn(
        self, session_id: str, request: MessageRequest | str, *, include_raw: bool | None = None
    ) -> AsyncEventStream:
        """As ``SandboxAgent.stream_turn``: the turn's events, ending with the turn."""
        return AsyncEventStream(self._turn(session_id, request, include_raw))

    async def _turn(
        self, session_id: str, request: MessageRequest | str, include_raw: bool | None
    ) -> AsyncIterator[UniversalEvent]:
        http_request = self._http.build_request(
            "POST",
            calls.session_path(session_id, "messages", "stream"),
            params=calls.query(include_raw=include_raw),
            json=calls.message_body(request),
            headers={"Accept": "text/event-stream"},
            timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
        )
        last: int | None = None
        try:
            async with self._stream(http_request) as response:
                async for event in self._read_events(response):
                    last = event["sequence"]
                    yield event
                    if event["type"] in TURN_STREAM_END:
                        return
        except RECONNECT_ERRORS:
            if last is None:
                raise
        if last is None:
            return
        async for event in self._follow(session_id, Resume(last, 5, 0.5), include_raw, until=TURN_STREAM_END):
            yield event

    async def _follow(
        self, session_id: str, resume: Resume, include_raw: bool | None, until: frozenset[str] | None
    ) -> AsyncIterator[UniversalEvent]:
        while True:
            request = self._http.build_request(
                "GET",
                calls.session_path(session_id, "events", "sse"),
                params=calls.query(include_raw=include_raw),
                headers=resume.headers(),
                timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
            )
            try:
                async with self._stream(request) as response:
                    async for event in self._read_events(response):
                        if resume.seen(event):
                            continue
                        yield event
                        if until is not None and event["type"] in until:
                            return
            except RECONNECT_ERRORS as exc:
                resume.dropped(exc)
            else:
                resume.dropped(None)
            delay = resume.next_delay()
            if delay is None:
                raise ConnectionLostError(resume.give_up_message())
            await asyncio.sleep(delay)

    @staticmethod
    async def _read_events(response: httpx.Response) -> AsyncIterator[UniversalEvent]:
        decoder = SseDecoder()
        async for chunk in response.aiter_text():
            for frame in decoder.feed(chunk):
                yield frame.event()

    def get_events_sse(
        self, session_id: str, *, offset: int | None = None, include_raw: bool | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        """The raw ``/events/sse`` response, as an async context manager of an ``httpx.Response``."""
        request = self._http.build_request(
            "GET",
            calls.session_path(session_id, "events", "sse"),
            params=calls.query(offset=offset, include_raw=include_raw),
            headers={"Accept": "text/event-stream"},
            timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
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
        return await self._send(calls.upload_fs_batch(archive, path, session_id))

    async def upload_directory(
        self, directory: str | os.PathLike[str], *, path: str | None = None, session_id: str | None = None
    ) -> FsUploadBatchResponse:
        """Uploads a local directory's contents under ``path``; the archive is made off the loop."""
        archive = await asyncio.to_thread(calls.tar_directory, directory)
        return await self.upload_fs_batch(archive, path=path, session_id=session_id)
