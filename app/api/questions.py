"""Question replies and rejections (legacy §3.13, §3.14)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from app.legacy.models import QuestionReplyRequest
from app.sessions import question_requests

from . import deps
from .forward import forward
from .openapi import json_request, operation, problems
from .parsing import json_body, path_param
from .routing import BridgeRoute

router = APIRouter(tags=["sessions"], route_class=BridgeRoute)
SessionId = Annotated[str, Path(description="Session id")]
QuestionId = Annotated[str, Path(description="Question id")]


@router.post(
    "/v1/sessions/{session_id}/questions/{question_id}/reply",
    operation_id="reply_question",
    status_code=204,
    summary="Reply to Question",
    description="Answers the agent's question; `answers[i]` fills its field *i*.",
    responses={204: {"description": "Answered"}, **problems(e404="No such session or pending question")},
    openapi_extra=operation(body=json_request("QuestionReplyRequest")),
)
async def reply_question(session_id: SessionId, question_id: QuestionId, request: Request) -> Response:
    if (forwarded := await forward(request, path_param(session_id))) is not None:
        return forwarded
    body = await json_body(request, QuestionReplyRequest)
    session = deps.manager(request).get(path_param(session_id))
    question_requests.reply(session, path_param(question_id), body.answers)
    await session.log.settled()
    return Response(status_code=204)


@router.post(
    "/v1/sessions/{session_id}/questions/{question_id}/reject",
    operation_id="reject_question",
    status_code=204,
    summary="Reject Question",
    description="Declines the agent's question.",
    responses={204: {"description": "Declined"}, **problems(e404="No such session or pending question")},
)
async def reject_question(session_id: SessionId, question_id: QuestionId, request: Request) -> Response:
    if (forwarded := await forward(request, path_param(session_id))) is not None:
        return forwarded
    session = deps.manager(request).get(path_param(session_id))  # no body; any body is ignored
    question_requests.reject(session, path_param(question_id))
    await session.log.settled()
    return Response(status_code=204)
