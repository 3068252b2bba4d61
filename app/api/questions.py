"""Question replies and rejections (legacy §3.13, §3.14)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.legacy.models import QuestionReplyRequest
from app.sessions import question_requests

from . import deps
from .parsing import json_body, path_param

router = APIRouter()


@router.post("/v1/sessions/{session_id}/questions/{question_id}/reply", operation_id="reply_question", status_code=204)
async def reply_question(session_id: str, question_id: str, request: Request) -> Response:
    body = await json_body(request, QuestionReplyRequest)
    session = deps.manager(request).get(path_param(session_id))
    question_requests.reply(session, path_param(question_id), body.answers)
    return Response(status_code=204)


@router.post(
    "/v1/sessions/{session_id}/questions/{question_id}/reject", operation_id="reject_question", status_code=204
)
async def reject_question(session_id: str, question_id: str, request: Request) -> Response:
    session = deps.manager(request).get(path_param(session_id))  # no body; any body is ignored
    question_requests.reject(session, path_param(question_id))
    return Response(status_code=204)
