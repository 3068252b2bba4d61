"""``/v1/fs/*`` (behavior §8): parse, resolve, call ``app.fs``, answer.

Bodies of PUT and upload-batch are streamed to disk as they arrive; the body limit middleware
stops them with 413, and the partial file or staging directory is removed.
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
from app.fs.paths import Confinement, confinement, fs_error, home_dir, resolve
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
from .parsing import Query, json_body

router = APIRouter(tags=["fs"])

# Files up to this size are answered in one piece (with Content-Length); larger ones are streamed.
WHOLE_READ_LIMIT = 4 * 1024 * 1024
CHUNK = 256 * 1024


# ---- OpenAPI documentation of the hand-parsed query strings and raw bodies ------------------------
def _param(name: str, description: str, *, required: bool = False, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "required": required, "schema": {"type": kind}}


SESSION_PARAM = _param("session_id", "Session id for relative paths (also `sessionId`)")
BINARY_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def _doc(*params: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"parameters": [*params, SESSION_PARAM], **(body or {})}


# ---- helpers ---------------------------------------------------------------------------------------
def _confinement(request: Request) -> Confinement:
    return confinement(tuple(deps.settings(request).fs_roots))


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
    responses={200: {"model": list[FsEntry]}},
    openapi_extra=_doc(_param("path", "Path to list (relative or absolute; default `.`)")),
)
async def fs_entries(request: Request) -> JSONResponse:
    path = await _path(request, Query(request), default=".")
    return JSONResponse(await _blocking(ops.list_entries, path, _confinement(request)))


@router.get(
    "/v1/fs/file",
    operation_id="fs_read_file",
    summary="Read File",
    responses={200: {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
    openapi_extra=_doc(_param("path", "File path (relative or absolute)", required=True)),
)
async def fs_read_file(request: Request) -> Response:
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
    responses={200: {"model": FsWriteResponse}},
    openapi_extra=_doc(_param("path", "File path (relative or absolute)", required=True), body=BINARY_BODY),
)
async def fs_write_file(request: Request) -> JSONResponse:
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
    responses={200: {"model": FsActionResponse}},
    openapi_extra=_doc(
        _param("path", "File or directory path", required=True),
        _param("recursive", "Delete directories recursively", kind="boolean"),
    ),
)
async def fs_delete_entry(request: Request) -> JSONResponse:
    query = Query(request)
    recursive = query.boolean("recursive")
    path = await _path(request, query, follow=False)
    await _blocking(ops.delete_entry, path, recursive, _confinement(request))
    return JSONResponse({"path": path})


@router.post(
    "/v1/fs/mkdir",
    operation_id="fs_mkdir",
    summary="Create Directory",
    responses={200: {"model": FsActionResponse}},
    openapi_extra=_doc(_param("path", "Directory path to create", required=True)),
)
async def fs_mkdir(request: Request) -> JSONResponse:
    path = await _path(request, Query(request))
    await _blocking(ops.mkdir, path, _confinement(request))
    return JSONResponse({"path": path})


@router.post(
    "/v1/fs/move",
    operation_id="fs_move",
    summary="Move Entry",
    responses={200: {"model": FsMoveResponse}},
    openapi_extra={
        "parameters": [SESSION_PARAM],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": FsMoveRequest.model_json_schema(by_alias=True)}},
        },
    },
)
async def fs_move(request: Request) -> JSONResponse:
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
    responses={200: {"model": FsStat}},
    openapi_extra=_doc(_param("path", "Path to stat (symlinks are followed)", required=True)),
)
async def fs_stat(request: Request) -> JSONResponse:
    path = await _path(request, Query(request))
    return JSONResponse(await _blocking(ops.stat_path, path, _confinement(request)))


@router.post(
    "/v1/fs/upload-batch",
    operation_id="fs_upload_batch",
    summary="Upload Files",
    description="Unpacks a plain (uncompressed) tar archive, sent with `Content-Type: application/x-tar`, "
    "into the destination directory. All or nothing; no entry may leave the destination.",
    responses={200: {"model": FsUploadBatchResponse}},
    openapi_extra=_doc(
        _param("path", "Destination directory (default `.`)"),
        body={
            "requestBody": {
                "required": True,
                "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    ),
)
async def fs_upload_batch(request: Request) -> JSONResponse:
    dest = await _path(request, Query(request), default=".")
    content_type = request.headers.get("content-type", "")
    if not content_type.strip().lower().startswith("application/x-tar"):
        raise InvalidRequest("content-type must be application/x-tar")
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
