"""``/v1/fs/*`` (behavior §8): parse, resolve, call ``app.fs``, answer.

Bodies of PUT and upload-batch are streamed to disk as they arrive; the body limit middleware
stops them with 413, and the partial file or staging directory is removed.

In a fleet, a request that names a ``session_id`` is served by the bridge that runs that session
(``forward``): its files are on that machine, and relative paths resolve against its working
directory there. Without one, this bridge's own filesystem is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from typing import Any, BinaryIO

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.errors import InvalidRequest
from app.fs import ops
from app.fs.paths import Confinement, fence_for, fs_error, home_dir, resolve
from app.fs.upload import TarUpload
from app.legacy.models import (
    FsActionResponse,
    FsEntry,
    FsMoveRequest,
    FsMoveResponse,
    FsStat,
    FsUploadBatchResponse,
    FsWriteResponse,
)

from . import deps
from .forward import forward
from .openapi import binary_request, json_request, operation, query
from .parsing import Query, json_body
from .routing import BridgeRoute

router = APIRouter(tags=["fs"], route_class=BridgeRoute)

# Files up to this size are answered in one piece (with Content-Length); larger ones are streamed.
WHOLE_READ_LIMIT = 4 * 1024 * 1024
CHUNK = 256 * 1024


SESSION = "Session id for relative paths (also `sessionId`)"


# ---- helpers ---------------------------------------------------------------------------------------
def _confinement(request: Request) -> Confinement:
    return fence_for(deps.settings(request))


def _root(request: Request, query: Query) -> str:
    """The session's fs root when a session id is given (404 if unknown), else $HOME."""
    session_id = query.session_id()
    if session_id is not None:
        return deps.manager(request).get(session_id).fs_root
    return home_dir()


async def _path(request: Request, query: Query, *, default: str | None = None, follow: bool = True) -> str:
    raw = query.string("path", required=default is None)
    path = resolve(raw if raw is not None else default or "", _root(request, query))
    # An early, friendly refusal (realpath touches the disk: in a thread); the operation itself
    # is confined by its walk from the root whatever changes meanwhile.
    fence = _confinement(request)
    if fence.enabled:
        await _blocking(partial(fence.check, path, follow=follow))
    return path


async def _elsewhere(request: Request) -> Response | None:
    """The answer of the bridge that runs the named session, when another one does (a fleet)."""
    if deps.manager(request).fleet is None:
        return None
    session_id = Query(request).session_id()
    if session_id is None:
        return None
    return await forward(request, session_id, files=True)


async def _blocking(fn: Any, *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def _chunks(fh: BinaryIO) -> Iterator[bytes]:
    try:
        while chunk := fh.read(CHUNK):
            yield chunk
    finally:
        fh.close()


# ---- endpoints -------------------------------------------------------------------------------------
@router.get(
    "/v1/fs/entries",
    operation_id="fs_entries",
    summary="List Directory",
    description="The entries of a directory.",
    responses={200: {"model": list[FsEntry], "description": "The entries"}},
    openapi_extra=query(
        "FsEntriesQuery", path="Directory to list (relative or absolute; default `.`)", session_id=SESSION
    ),
)
async def fs_entries(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    path = await _path(request, Query(request), default=".")
    return JSONResponse(await _blocking(ops.list_entries, path, _confinement(request)))


@router.get(
    "/v1/fs/file",
    operation_id="fs_read_file",
    summary="Read File",
    description="The bytes of a file.",
    responses={
        200: {
            "description": "The file",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
    openapi_extra=query("FsPathQuery", path="File path (relative or absolute)", session_id=SESSION),
)
async def fs_read_file(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    path = await _path(request, Query(request))
    fh, size = await _blocking(ops.open_file, path, _confinement(request))
    if size > WHOLE_READ_LIMIT:
        return StreamingResponse(_chunks(fh), media_type="application/octet-stream")
    try:
        data = await _blocking(fh.read)
    except OSError as exc:
        raise fs_error(exc, path) from exc
    finally:
        fh.close()
    return Response(data, media_type="application/octet-stream")


@router.put(
    "/v1/fs/file",
    operation_id="fs_write_file",
    summary="Write File",
    description="Writes the body to a file (created, or replaced whole).",
    responses={200: {"model": FsWriteResponse, "description": "Written"}},
    openapi_extra=operation(
        body=binary_request("application/octet-stream"),
        **query("FsPathQuery", path="File path (relative or absolute)", session_id=SESSION),
    ),
)
async def fs_write_file(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    path = await _path(request, Query(request))
    try:
        writer = await _blocking(ops.AtomicWriter, path, _confinement(request))
    except OSError as exc:
        raise fs_error(exc, path) from exc
    try:
        async for chunk in request.stream():
            writer.write(chunk)
        size = await _blocking(writer.commit)
    except OSError as exc:
        writer.abort()
        raise fs_error(exc, path) from exc
    except BaseException:
        writer.abort()  # over the limit, client gone, cancelled: no partial file
        raise
    return JSONResponse({"path": path, "bytesWritten": size})


@router.delete(
    "/v1/fs/entry",
    operation_id="fs_delete_entry",
    summary="Delete Entry",
    description="Deletes a file, or a directory (its contents too with `recursive`).",
    responses={200: {"model": FsActionResponse, "description": "Deleted"}},
    openapi_extra=query(
        "FsDeleteQuery", path="File or directory path", session_id=SESSION, recursive="Delete a directory's contents"
    ),
)
async def fs_delete_entry(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    query = Query(request)
    recursive = query.boolean("recursive")
    path = await _path(request, query, follow=False)
    await _blocking(ops.delete_entry, path, recursive, _confinement(request))
    return JSONResponse({"path": path})


@router.post(
    "/v1/fs/mkdir",
    operation_id="fs_mkdir",
    summary="Create Directory",
    description="Creates a directory and its missing parents.",
    responses={200: {"model": FsActionResponse, "description": "Created"}},
    openapi_extra=query("FsPathQuery", path="Directory to create", session_id=SESSION),
)
async def fs_mkdir(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    path = await _path(request, Query(request))
    await _blocking(ops.mkdir, path, _confinement(request))
    return JSONResponse({"path": path})


@router.post(
    "/v1/fs/move",
    operation_id="fs_move",
    summary="Move Entry",
    description="Moves or renames a file or directory.",
    responses={200: {"model": FsMoveResponse, "description": "Moved"}},
    openapi_extra=operation(body=json_request("FsMoveRequest"), **query("FsSessionQuery", session_id=SESSION)),
)
async def fs_move(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    query = Query(request)
    root = _root(request, query)
    body = await json_body(request, FsMoveRequest)
    source, dest = resolve(body.from_, root), resolve(body.to, root)
    fence = _confinement(request)
    await _blocking(partial(fence.check, source, follow=False))
    await _blocking(partial(fence.check, dest, follow=False))
    await _blocking(ops.move_entry, source, dest, bool(body.overwrite), fence)
    return JSONResponse({"from": source, "to": dest})


@router.get(
    "/v1/fs/stat",
    operation_id="fs_stat",
    summary="Get File Info",
    description="Type, size and modification time of a path.",
    responses={200: {"model": FsStat, "description": "The entry"}},
    openapi_extra=query("FsPathQuery", path="Path to look at (symlinks are followed)", session_id=SESSION),
)
async def fs_stat(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    path = await _path(request, Query(request))
    return JSONResponse(await _blocking(ops.stat_path, path, _confinement(request)))


@router.post(
    "/v1/fs/upload-batch",
    operation_id="fs_upload_batch",
    summary="Upload Files",
    description="Unpacks a plain (uncompressed) tar archive into the destination directory, all or nothing; "
    "no entry may leave the destination. The body is sent as `application/octet-stream` or `application/x-tar` "
    "(the second is the bridge's addition to the legacy document).",
    responses={200: {"model": FsUploadBatchResponse, "description": "Unpacked"}},
    openapi_extra=operation(
        body=binary_request("application/octet-stream", additions=("application/x-tar",)),
        **query("FsUploadBatchQuery", path="Destination directory (default `.`)", session_id=SESSION),
    ),
)
async def fs_upload_batch(request: Request) -> Response:
    if (elsewhere := await _elsewhere(request)) is not None:
        return elsewhere
    dest = await _path(request, Query(request), default=".")
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() not in ("application/x-tar", "application/octet-stream"):
        raise InvalidRequest("content-type must be application/x-tar or application/octet-stream")
    try:
        upload = await _blocking(TarUpload, dest, deps.settings(request).upload_unpacked_limit, _confinement(request))
    except OSError as exc:
        raise fs_error(exc, dest) from exc
    try:
        async for chunk in request.stream():
            upload.write(chunk)
    except OSError as exc:
        upload.abort()
        raise fs_error(exc, dest) from exc
    except BaseException:
        upload.abort()
        raise
    try:
        result = await _blocking(upload.finish)  # removes the staging directory whatever happens
    except OSError as exc:
        raise fs_error(exc, dest) from exc
    return JSONResponse(result)
