"""``SandboxAgent``: the synchronous client."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import TypeVar

import httpx

from . import calls
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
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# A stream waits this long for a byte; the server sends a keep-alive comment every 15 s by default.
STREAM_READ_TIMEOUT = 60.0


class EventStream(Iterator[UniversalEvent]):
    """The events of an SSE stream, as they arrive; ``close()`` (or leaving a ``with``) ends it."""

    def __init__(self, events: Iterator[UniversalEvent]) -> None:
        self._events = events

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> UniversalEvent:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxAgent:
    """A client of one server. ``SandboxAgent(base_url, token=...)`` connects to a running server;
    ``SandboxAgent.start()`` runs one as a child process, stopped by ``close()``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._http.base_url = httpx.URL(self.base_url)
        self._http.headers.update(calls.headers(token, headers))
        self._process: BridgeProcess | None = None

    @classmethod
    def start(
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
    ) -> SandboxAgent:
        """Runs ``acp-rest-bridge server`` on a free port (``port=0``) with a random token, waits until
        it is healthy and returns a client of it; ``close()`` stops it. ``binary``: the command, else
        ``$ACP_REST_BRIDGE_BIN``, else ``acp-rest-bridge`` on PATH. ``log``: ``inherit``, ``silent``."""
        process = spawn_bridge(
            binary=binary, host=host, port=port, token=token, args=args, env=env, log=log, timeout=timeout
        )
        client = cls(process.base_url, token=process.token, headers=headers)
        client._process = process
        return client

    @property
    def process(self) -> BridgeProcess | None:
        """The server process ``start()`` runs, if any."""
        return self._process

    # ---- plumbing -----------------------------------------------------------------------------
    def _send(self, call: calls.Call[T]) -> T:
        response = self._http.send(call.request(self._http))
        if response.is_error:
            raise error_for(response)
        return call.read(response)

    @contextmanager
    def _stream(self, request: httpx.Request) -> Iterator[httpx.Response]:
        response = self._http.send(request, stream=True)
        try:
            if response.is_error:
                response.read()
                raise error_for(response)
            yield response
        finally:
            response.close()

    def close(self) -> None:
        """Closes the connections, and stops the server ``start()`` ran."""
        if self._owns_http:
            self._http.close()
        if self._process is not None:
            self._process.stop()
            self._process = None

    dispose = close

    def __enter__(self) -> SandboxAgent:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- meta and agents ------------------------------------------------------------------------
    def get_health(self) -> HealthResponse:
        return self._send(calls.get_health())

    def list_agents(self) -> AgentListResponse:
        return self._send(calls.list_agents())

    def install_agent(self, agent: str, request: AgentInstallRequest | None = None) -> None:
        self._send(calls.install_agent(agent, request))

    def get_agent_modes(self, agent: str) -> AgentModesResponse:
        return self._send(calls.get_agent_modes(agent))

    def get_agent_models(self, agent: str) -> AgentModelsResponse:
        return self._send(calls.get_agent_models(agent))

    # ---- sessions -------------------------------------------------------------------------------
    def create_session(self, session_id: str, request: CreateSessionRequest) -> CreateSessionResponse:
        return self._send(calls.create_session(session_id, request))

    def list_sessions(self) -> SessionListResponse:
        return self._send(calls.list_sessions())

    def post_message(self, session_id: str, request: MessageRequest | str) -> None:
        """Sends a message (a ``MessageRequest`` or its text); the turn runs in the background."""
        self._send(calls.post_message(session_id, request))

    def get_events(
        self, session_id: str, *, offset: int | None = None, limit: int | None = None, include_raw: bool | None = None
    ) -> EventsResponse:
        """One page of events with a sequence above ``offset``."""
        return self._send(calls.get_events(session_id, offset, limit, include_raw))

    def reply_question(self, session_id: str, question_id: str, request: QuestionReplyRequest) -> None:
        self._send(calls.reply_question(session_id, question_id, request))

    def reject_question(self, session_id: str, question_id: str) -> None:
        self._send(calls.reject_question(session_id, question_id))

    def reply_permission(self, session_id: str, permission_id: str, reply: PermissionReply) -> None:
        """Answers a permission request: ``once``, ``always`` or ``reject``."""
        self._send(calls.reply_permission(session_id, permission_id, reply))

    def terminate_session(self, session_id: str) -> None:
        self._send(calls.terminate_session(session_id))

    # ---- streams --------------------------------------------------------------------------------
    def stream_events(
        self,
        session_id: str,
        *,
        offset: int | None = None,
        include_raw: bool | None = None,
        reconnect_attempts: int = 5,
        reconnect_delay: float = 0.5,
    ) -> EventStream:
        """The session's events with a sequence above ``offset``, then live ones, without end. After a
        drop the stream reconnects with ``Last-Event-ID`` (up to ``reconnect_attempts`` tries in a row,
        ``reconnect_delay`` doubling between them) and yields no event twice and none missed."""
        resume = Resume(offset or 0, reconnect_attempts, reconnect_delay)
        return EventStream(self._follow(session_id, resume, include_raw, until=None))

    def stream_turn(
        self, session_id: str, request: MessageRequest | str, *, include_raw: bool | None = None
    ) -> EventStream:
        """Sends a message and yields its turn's events; ends after the turn's end (or the first
        permission or question request, error or session end), as the server's turn stream does. A
        stream cut before its end is followed up on ``/events/sse`` from the last event seen."""
        return EventStream(self._turn(session_id, request, include_raw))

    def _turn(
        self, session_id: str, request: MessageRequest | str, include_raw: bool | None
    ) -> Iterator[UniversalEvent]:
        url = calls.session_path(session_id, "messages", "stream")
        http_request = self._http.build_request(
            "POST",
            url,
            params=calls.query(include_raw=include_raw),
            json=calls.message_body(request),
            headers={"Accept": "text/event-stream"},
            timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
        )
        last: int | None = None
        try:
            with self._stream(http_request) as response:
                for event in self._read_events(response):
                    last = event["sequence"]
                    yield event
                    if event["type"] in TURN_STREAM_END:
                        return
        except RECONNECT_ERRORS:
            if last is None:
                raise  # nothing was seen: whether the message was accepted is unknown
        if last is None:
            return
        yield from self._follow(session_id, Resume(last, 5, 0.5), include_raw, until=TURN_STREAM_END)

    def _follow(
        self, session_id: str, resume: Resume, include_raw: bool | None, until: frozenset[str] | None
    ) -> Iterator[UniversalEvent]:
        while True:
            request = self._http.build_request(
                "GET",
                calls.session_path(session_id, "events", "sse"),
                params=calls.query(include_raw=include_raw),
                headers=resume.headers(),
                timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
            )
            try:
                with self._stream(request) as response:
                    for event in self._read_events(response):
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
            time.sleep(delay)

    @staticmethod
    def _read_events(response: httpx.Response) -> Iterator[UniversalEvent]:
        decoder = SseDecoder()
        for chunk in response.iter_text():
            for frame in decoder.feed(chunk):
                yield frame.event()

    def get_events_sse(
        self, session_id: str, *, offset: int | None = None, include_raw: bool | None = None
    ) -> AbstractContextManager[httpx.Response]:
        """The raw ``/events/sse`` response, as a context manager of an ``httpx.Response``."""
        request = self._http.build_request(
            "GET",
            calls.session_path(session_id, "events", "sse"),
            params=calls.query(offset=offset, include_raw=include_raw),
            headers={"Accept": "text/event-stream"},
            timeout=httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT),
        )
        return self._stream(request)

    # ---- filesystem ------------------------------------------------------------------------------
    def list_fs_entries(self, *, path: str | None = None, session_id: str | None = None) -> list[FsEntry]:
        return self._send(calls.list_fs_entries(path, session_id))

    def read_fs_file(self, path: str, *, session_id: str | None = None) -> bytes:
        return self._send(calls.read_fs_file(path, session_id))

    def write_fs_file(self, path: str, content: bytes, *, session_id: str | None = None) -> FsWriteResponse:
        return self._send(calls.write_fs_file(path, content, session_id))

    def delete_fs_entry(
        self, path: str, *, recursive: bool | None = None, session_id: str | None = None
    ) -> FsActionResponse:
        return self._send(calls.delete_fs_entry(path, recursive, session_id))

    def mkdir_fs(self, path: str, *, session_id: str | None = None) -> FsActionResponse:
        return self._send(calls.mkdir_fs(path, session_id))

    def move_fs(self, request: FsMoveRequest, *, session_id: str | None = None) -> FsMoveResponse:
        return self._send(calls.move_fs(request, session_id))

    def stat_fs(self, path: str, *, session_id: str | None = None) -> FsStat:
        return self._send(calls.stat_fs(path, session_id))

    def upload_fs_batch(
        self, archive: bytes, *, path: str | None = None, session_id: str | None = None
    ) -> FsUploadBatchResponse:
        """Unpacks a tar archive under ``path``."""
        return self._send(calls.upload_fs_batch(archive, path, session_id))

    def upload_directory(
        self, directory: str | os.PathLike[str], *, path: str | None = None, session_id: str | None = None
    ) -> FsUploadBatchResponse:
        """Uploads a local directory's contents under ``path``, as one tar archive."""
        return self.upload_fs_batch(calls.tar_directory(directory), path=path, session_id=session_id)
