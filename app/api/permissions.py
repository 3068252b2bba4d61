"""Permission replies (legacy §3.15)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from app.legacy.models import PermissionReplyRequest
from app.sessions import permission_requests

from . import deps
from .forward import forward
from .openapi import json_request, operation, problems
from .parsing import json_body, path_param
from .routing import BridgeRoute

router = APIRouter(tags=["sessions"], route_class=BridgeRoute)


@router.post(
    "/v1/sessions/{session_id}/permissions/{permission_id}/reply",
    operation_id="reply_permission",
    status_code=204,
    summary="Reply to Permission",
    description="Answers the agent's permission request: `once`, `always` or `reject`.",
    responses={204: {"description": "Answered"}, **problems(e404="No such session or pending permission")},
    openapi_extra=operation(body=json_request("PermissionReplyRequest")),
)
async def reply_permission(
    session_id: Annotated[str, Path(description="Session id")],
    permission_id: Annotated[str, Path(description="Permission id")],
    request: Request,
) -> Response:
    if (forwarded := await forward(request, path_param(session_id))) is not None:
        return forwarded
    body = await json_body(request, PermissionReplyRequest)
    session = deps.manager(request).get(path_param(session_id))
    permission_requests.reply(session, path_param(permission_id), body.reply)
    await session.log.settled()
    return Response(status_code=204)
