"""Each API operation as plain data: method, path, query, body and how to read the answer. The sync
and async clients send the same calls, so the two cannot drift apart."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx

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
)

T = TypeVar("T")
QueryValue = str | int | bool | None

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# A stream waits this long for a byte; the server sends a keep-alive comment every 15 s by default.
STREAM_READ_TIMEOUT = 60.0
STREAM_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT.connect, read=STREAM_READ_TIMEOUT)
# The server closes POST .../messages/stream after the first of these (legacy behaviour).
TURN_STREAM_END = frozenset(
    {"turn.ended", "session.ended", "error", "agent.unparsed", "permission.requested", "question.requested"}
)


def _json(response: httpx.Response) -> Any:
    return json.loads(response.content) if response.content else None


def _none(response: httpx.Response) -> None:
    return None


def _bytes(response: httpx.Response) -> bytes:
    return response.content


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    query: dict[str, str] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None
    content_type: str | None = None
    accept: str = "application/json"

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        headers = {"Accept": self.accept}
        if self.content_type:
            headers["Content-Type"] = self.content_type
        if self.json is not None:
            return client.build_request(self.method, self.path, params=self.query, json=self.json, headers=headers)
        return client.build_request(self.method, self.path, params=self.query, content=self.content, headers=headers)


def query(**values: QueryValue) -> dict[str, str]:
    """Query parameters without the unset ones; booleans as ``true``/``false``."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def segment(value: str) -> str:
    """A path segment, percent-encoded (slashes included)."""
    return quote(value, safe="")


def session_path(session_id: str, *rest: str) -> str:
    return "/".join(["/v1/sessions", segment(session_id), *rest])


# ---- meta and agents -----------------------------------------------------------------------------
def get_health() -> Call[HealthResponse]:
    return Call("GET", "/v1/health", cast(Callable[[httpx.Response], HealthResponse], _json))


def list_agents() -> Call[AgentListResponse]:
    return Call("GET", "/v1/agents", cast(Callable[[httpx.Response], AgentListResponse], _json))


def install_agent(agent: str, request: AgentInstallRequest | None) -> Call[None]:
    return Call("POST", f"/v1/agents/{segment(agent)}/install", _none, json=dict(request or {}))


def get_agent_modes(agent: str) -> Call[AgentModesResponse]:
    return Call(
        "GET", f"/v1/agents/{segment(agent)}/modes", cast(Callable[[httpx.Response], AgentModesResponse], _json)
    )


def get_agent_models(agent: str) -> Call[AgentModelsResponse]:
    read = cast(Callable[[httpx.Response], AgentModelsResponse], _json)
    return Call("GET", f"/v1/agents/{segment(agent)}/models", read)


# ---- sessions ------------------------------------------------------------------------------------
def create_session(session_id: str, request: CreateSessionRequest) -> Call[CreateSessionResponse]:
    read = cast(Callable[[httpx.Response], CreateSessionResponse], _json)
    return Call("POST", session_path(session_id), read, json=dict(request))


def list_sessions() -> Call[SessionListResponse]:
    return Call("GET", "/v1/sessions", cast(Callable[[httpx.Response], SessionListResponse], _json))


def message_body(request: MessageRequest | str) -> dict[str, Any]:
    return {"message": request} if isinstance(request, str) else dict(request)


def stream_request(
    client: httpx.Client | httpx.AsyncClient,
    method: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    json: Any = None,
) -> httpx.Request:
    """A request whose answer is an SSE stream: a byte may be long in coming (STREAM_READ_TIMEOUT)."""
    return client.build_request(method, path, params=query, json=json, headers=headers, timeout=STREAM_TIMEOUT)


def post_message(session_id: str, request: MessageRequest | str) -> Call[None]:
    return Call("POST", session_path(session_id, "messages"), _none, json=message_body(request))


def get_events(
    session_id: str, offset: int | None, limit: int | None, include_raw: bool | None
) -> Call[EventsResponse]:
    read = cast(Callable[[httpx.Response], EventsResponse], _json)
    params = query(offset=offset, limit=limit, include_raw=include_raw)
    return Call("GET", session_path(session_id, "events"), read, query=params)


def reply_question(session_id: str, question_id: str, request: QuestionReplyRequest) -> Call[None]:
    path = session_path(session_id, "questions", segment(question_id), "reply")
    return Call("POST", path, _none, json=dict(request))


def reject_question(session_id: str, question_id: str) -> Call[None]:
    return Call("POST", session_path(session_id, "questions", segment(question_id), "reject"), _none)


def reply_permission(session_id: str, permission_id: str, reply: PermissionReply) -> Call[None]:
    path = session_path(session_id, "permissions", segment(permission_id), "reply")
    return Call("POST", path, _none, json={"reply": reply})


def terminate_session(session_id: str) -> Call[None]:
    return Call("POST", session_path(session_id, "terminate"), _none)


# ---- filesystem ----------------------------------------------------------------------------------
def list_fs_entries(path: str | None, session_id: str | None) -> Call[list[FsEntry]]:
    read = cast(Callable[[httpx.Response], list[FsEntry]], _json)
    return Call("GET", "/v1/fs/entries", read, query=query(path=path, session_id=session_id))


def read_fs_file(path: str, session_id: str | None) -> Call[bytes]:
    params = query(path=path, session_id=session_id)
    return Call("GET", "/v1/fs/file", _bytes, query=params, accept="application/octet-stream")


def write_fs_file(path: str, content: bytes, session_id: str | None) -> Call[FsWriteResponse]:
    read = cast(Callable[[httpx.Response], FsWriteResponse], _json)
    params = query(path=path, session_id=session_id)
    return Call("PUT", "/v1/fs/file", read, query=params, content=content, content_type="application/octet-stream")


def delete_fs_entry(path: str, recursive: bool | None, session_id: str | None) -> Call[FsActionResponse]:
    read = cast(Callable[[httpx.Response], FsActionResponse], _json)
    params = query(path=path, session_id=session_id, recursive=recursive)
    return Call("DELETE", "/v1/fs/entry", read, query=params)


def mkdir_fs(path: str, session_id: str | None) -> Call[FsActionResponse]:
    read = cast(Callable[[httpx.Response], FsActionResponse], _json)
    return Call("POST", "/v1/fs/mkdir", read, query=query(path=path, session_id=session_id))


def move_fs(request: FsMoveRequest, session_id: str | None) -> Call[FsMoveResponse]:
    read = cast(Callable[[httpx.Response], FsMoveResponse], _json)
    return Call("POST", "/v1/fs/move", read, query=query(session_id=session_id), json=dict(request))


def stat_fs(path: str, session_id: str | None) -> Call[FsStat]:
    read = cast(Callable[[httpx.Response], FsStat], _json)
    return Call("GET", "/v1/fs/stat", read, query=query(path=path, session_id=session_id))


def upload_fs_batch(archive: bytes, path: str | None, session_id: str | None) -> Call[FsUploadBatchResponse]:
    read = cast(Callable[[httpx.Response], FsUploadBatchResponse], _json)
    params = query(path=path, session_id=session_id)
    return Call("POST", "/v1/fs/upload-batch", read, query=params, content=archive, content_type="application/x-tar")


def tar_directory(directory: str | os.PathLike[str]) -> bytes:
    """A tar archive of a directory's contents (names relative to it), for ``upload_fs_batch``.
    Symbolic links are stored as links; the server refuses those that lead out of the destination."""
    root = Path(directory)
    if not root.is_dir():
        raise NotADirectoryError(str(root))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for entry in sorted(root.rglob("*")):
            archive.add(entry, arcname=entry.relative_to(root).as_posix(), recursive=False)
    return buffer.getvalue()


def headers(token: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(extra or {})
    if token:
        out["Authorization"] = f"Bearer {token}"
    return out
