"""Permission replies (legacy §3.15)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.legacy.models import PermissionReplyRequest
from app.sessions import permission_requests

from . import deps
from .parsing import json_body, path_param

router = APIRouter()


@router.post(
    "/v1/sessions/{session_id}/permissions/{permission_id}/reply", operation_id="reply_permission", status_code=204
)
async def reply_permission(session_id: str, permission_id: str, request: Request) -> Response:
    body = await json_body(request, PermissionReplyRequest)
    session = deps.manager(request).get(path_param(session_id))
    permission_requests.reply(session, path_param(permission_id), body.reply)
    return Response(status_code=204)
