from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from starlette.responses import JSONResponse

from app.legacy.models import (
    CreateSessionRequest,
    CreateSessionResponse,
    MessageRequest,
    SessionListResponse,
)
from app.sessions.attachments import read_images

from . import deps
from .forward import forward
from .openapi import json_request, operation, problems
from .parsing import json_body, path_param
from .routing import BridgeRoute

router = APIRouter(tags=["sessions"], route_class=BridgeRoute)
SessionId = Annotated[str, Path(description="Session id")]


@router.get(
    "/v1/sessions",
    operation_id="list_sessions",
    summary="List Sessions",
    description="Every session of this server, running or ended.",
    responses={200: {"model": SessionListResponse, "description": "The sessions"}},
)
async def list_sessions(request: Request) -> JSONResponse:
    manager = deps.manager(request)
    if manager.fleet is not None:
        await manager.fleet.sync()  # every bridge's sessions, as the database has them now
    return JSONResponse({"sessions": [s.info() for s in manager.list()]})


@router.post(
    "/v1/sessions/{session_id}",
    operation_id="create_session",
    summary="Create Session",
    description="Starts the agent's process and an ACP session with the given settings.",
    responses={
        200: {"model": CreateSessionResponse, "description": "The session runs"},
        **problems(e400="Invalid request", e409="The session id is taken"),
    },
    openapi_extra=operation(body=json_request("CreateSessionRequest")),
)
async def create_session(
    session_id: Annotated[str, Path(description="Client session id")], request: Request
) -> JSONResponse:
    body = await json_body(request, CreateSessionRequest)
    session = await deps.manager(request).create(path_param(session_id), body.as_request())
    await session.log.settled()  # what was recorded is durable before it is acknowledged
    return JSONResponse({"healthy": True, "nativeSessionId": session.native_session_id})


async def accept_message(request: Request, session_id: str) -> str:
    """Shared by messages and messages/stream: parse, check, hand the message to the session.
    Returns the id of the message's turn."""
    body = await json_body(request, MessageRequest)
    manager = deps.manager(request)
    listed = manager.get(session_id)
    manager.check_storage()
    session = await manager.ready(listed)  # a session suspended by a restart starts its agent again
    attachments = [session.attachment(a.path, a.mime, a.filename) for a in body.attachments or []]
    session.check_accepting()
    image_data = await read_images(session, attachments)
    turn_id = session.send_message(body.message, attachments, image_data)
    await session.log.settled()  # what was recorded is durable before it is acknowledged
    return turn_id


@router.post(
    "/v1/sessions/{session_id}/messages",
    operation_id="post_message",
    status_code=204,
    summary="Send Message",
    description="Starts a turn with the message and answers at once; the turn's events follow.",
    responses={204: {"description": "Accepted"}, **problems(e404="No such session")},
    openapi_extra=operation(body=json_request("MessageRequest")),
)
async def post_message(session_id: SessionId, request: Request) -> Response:
    if (forwarded := await forward(request, path_param(session_id))) is not None:
        return forwarded
    await accept_message(request, path_param(session_id))
    return Response(status_code=204)


@router.post(
    "/v1/sessions/{session_id}/terminate",
    operation_id="terminate_session",
    status_code=204,
    summary="Terminate Session",
    description="Cancels the running turn and stops the agent's process.",
    responses={204: {"description": "Terminated"}, **problems(e404="No such session")},
)
async def terminate_session(session_id: SessionId, request: Request) -> Response:
    if (forwarded := await forward(request, path_param(session_id))) is not None:
        return forwarded
    session = deps.manager(request).get(path_param(session_id))
    await session.terminate()
    await session.log.settled()
    return Response(status_code=204)
