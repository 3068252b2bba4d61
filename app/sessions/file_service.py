"""ACP client services ``fs/read_text_file`` and ``fs/write_text_file``: the agent reads and writes
files through the bridge, under the same confinement as ``/v1/fs``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from app.acp.requests import ReadTextFileRequest, WriteTextFileRequest
from app.acp.sdk import RequestError
from app.errors import PermissionDenied
from app.fs import ops
from app.fs.paths import Confinement, fence_for, os_message

from .diff_files import read_files
from .host import SessionHost

RESOURCE_NOT_FOUND = -32002
INTERNAL_ERROR = -32603


def _fence(session: SessionHost) -> Confinement:
    return fence_for(session.settings)


def _denied(path: str) -> RequestError:
    return RequestError(
        INTERNAL_ERROR, f"Permission denied: {path} is outside the allowed filesystem roots", {"path": path}
    )


def checked_path(session: SessionHost, path: str) -> str:
    """ACP paths are absolute; with confinement on they must stay inside a root (checked here, and
    again by the operation, which reaches the file by a walk from the root)."""
    if not os.path.isabs(path) or "\x00" in path:
        raise RequestError(-32602, f"Invalid params: path must be absolute: {path}", {"path": path})
    if not _fence(session).allows(path):
        raise _denied(path)
    return path


def _os_failure(exc: OSError, path: str) -> RequestError:
    if isinstance(exc, FileNotFoundError):
        # Agents (gemini among them) look for this code and text to tell "new file" from a failure.
        return RequestError(RESOURCE_NOT_FOUND, f"Resource not found: {path}", {"uri": path})
    return RequestError(INTERNAL_ERROR, f"{os_message(exc)}: {path}", {"path": path})


async def read_text_file(session: SessionHost, params: Any, request_id: Any) -> dict[str, Any]:
    request = ReadTextFileRequest.model_validate(params)
    path = checked_path(session, request.path)
    try:
        content = await asyncio.to_thread(ops.read_text, path, request.line, request.limit, _fence(session))
    except PermissionDenied as exc:
        raise _denied(path) from exc
    except OSError as exc:
        raise _os_failure(exc, path) from exc
    return {"content": content}


def _write(path: str, content: str, fence: Confinement) -> dict[str, str | None]:
    """The file's text before (``diff_files``: None if it did not exist, left out if unreadable),
    then the write. Blocking."""
    before = read_files([path], fence)
    ops.write_bytes(path, content.encode("utf-8"), fence)
    return before


async def write_text_file(session: SessionHost, params: Any, request_id: Any) -> dict[str, Any]:
    request = WriteTextFileRequest.model_validate(params)
    path = checked_path(session, request.path)
    try:
        before = await asyncio.to_thread(_write, path, request.content, _fence(session))
    except PermissionDenied as exc:
        raise _denied(path) from exc
    except OSError as exc:
        raise _os_failure(exc, path) from exc
    if path in before:  # the change, exactly, for the diff of the tool call that made it
        session.translator.file_written(path, before[path], request.content)
    return {}  # the schema wants an empty object, not null
