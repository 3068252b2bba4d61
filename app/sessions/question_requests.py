"""Questions: ACP elicitation (form mode) and the legacy-shaped extension request <-> legacy
question.requested/resolved and the reply/reject endpoints.

- ``elicitation/create`` with ``mode: "form"``: ``prompt`` is the message, ``options`` the labels of
  the form's first field; the requested schema stays reachable in the event's ``raw``. A reply fills
  field *i* from ``answers[i]`` (``accept`` with ``content``); reject is ``decline``; a cancel is
  ``cancel``. URL mode is not advertised; such a request is declined and reported.
- ``_sandbox-agent/session/request_question`` ``{prompt, options, questionId?}`` answers
  ``{"outcome":"answered","answers":[[...]]}``, ``{"outcome":"rejected"}`` or ``{"outcome":"cancelled"}``.

``question_id`` is ``_meta["sandbox-agent/questionId"]`` (or the extension's ``questionId``), else the
elicitation's ``toolCallId``, made unique in the session; otherwise ``question_<n>``.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.acp.sdk import RequestError
from app.events.model import QUESTION_REQUESTED, QUESTION_RESOLVED
from app.translate.hitl_shapes import (
    ELICITATION_ACCEPT,
    ELICITATION_CANCEL,
    ELICITATION_DECLINE,
    QuestionInfo,
    elicitation_content,
    elicitation_question,
    extension_question,
    first_answer,
    question_data,
)

from .host import SessionHost
from .remote import RemoteSession
from .request_book import HumanRequest, RequestBook, response_raw

ELICITATION = "elicitation/create"
EXTENSION = "_sandbox-agent/session/request_question"
QuestionRequest = HumanRequest[QuestionInfo]


class Questions(RequestBook[QuestionInfo]):
    """A session's questions (elicitations and the legacy-shaped extension request)."""

    kind = "question"

    def record_cancelled(self, session: SessionHost, request: QuestionRequest) -> None:
        _record_resolved(session, request, None, "rejected", _cancel_result(request.method))


class QuestionHost(SessionHost, Protocol):
    """A session with questions."""

    @property
    def questions(self) -> Questions: ...


def _cancel_result(method: str) -> dict[str, Any]:
    return {"action": ELICITATION_CANCEL} if method == ELICITATION else {"outcome": "cancelled"}


def _reject_result(method: str) -> dict[str, Any]:
    return {"action": ELICITATION_DECLINE} if method == ELICITATION else {"outcome": "rejected"}


def _answer_result(request: QuestionRequest, answers: list[list[str]]) -> dict[str, Any]:
    if request.method == ELICITATION:
        return {"action": ELICITATION_ACCEPT, "content": elicitation_content(request.info.schema, answers)}
    return {"outcome": "answered", "answers": answers}


def _record_resolved(
    session: SessionHost, request: QuestionRequest, response: str | None, status: str, result: Any
) -> None:
    info = request.info
    data = question_data(request.public_id, info.prompt, info.options, response, status)
    session.record_one(QUESTION_RESOLVED, data, synthetic=True, raw=response_raw(request, result))


def _reject(session: SessionHost, request: QuestionRequest) -> None:
    result = _reject_result(request.method)
    if request.book.finish(request, result):
        _record_resolved(session, request, None, "rejected", result)


# ---- agent side ----------------------------------------------------------------------------------
def _is_form(params: dict[str, Any]) -> bool:
    return bool(params.get("mode", "form") == "form")


def _register(session: QuestionHost, message: dict[str, Any], info: QuestionInfo) -> None:
    cancel_result = _cancel_result(message["method"])
    request = session.questions.add(session, message, info, info.candidates, "question", cancel_result)
    data = question_data(request.public_id, info.prompt, info.options, None, "requested")
    session.record_one(QUESTION_REQUESTED, data, synthetic=False, raw=message)
    if session.ended:
        session.cancel_one(request.request_id)


def observe_elicitation(session: QuestionHost, message: dict[str, Any]) -> None:
    params = message.get("params")
    if not isinstance(params, dict):
        return
    if not _is_form(params):
        error = f"elicitation mode {params.get('mode')!r} is not supported (only form is advertised); declined"
        session.record(session.translator.unparsed(error, ELICITATION, message))
        return
    _register(session, message, elicitation_question(params))


def observe_extension(session: QuestionHost, message: dict[str, Any]) -> None:
    if isinstance(message.get("params"), dict):
        _register(session, message, extension_question(message["params"]))


async def handle_elicitation(session: QuestionHost, params: Any, request_id: Any) -> Any:
    if isinstance(params, dict) and not _is_form(params):
        return {"action": ELICITATION_DECLINE}
    return await session.questions.wait(session, request_id, _reject)


async def handle_extension(session: QuestionHost, params: Any, request_id: Any) -> Any:
    if not isinstance(params, dict):
        raise RequestError.invalid_params({"message": "params must be an object"})
    return await session.questions.wait(session, request_id, _reject)


# ---- HTTP side -----------------------------------------------------------------------------------
def _lookup(session: QuestionHost, question_id: str) -> tuple[Questions, QuestionRequest]:
    questions = session.questions
    request = questions.lookup(question_id)
    questions.check_session(session, request)
    return questions, request


def reply(session: QuestionHost | RemoteSession, question_id: str, answers: list[list[str]]) -> None:
    """``POST .../questions/{id}/reply`` after the session lookup (legacy §7.2 order). A session
    another bridge runs holds no request here (``forward`` sends the replies of a live one there)."""
    if isinstance(session, RemoteSession):
        raise Questions.unknown(question_id)
    questions, request = _lookup(session, question_id)
    result = _answer_result(request, answers)
    if questions.finish(request, result):
        _record_resolved(session, request, first_answer(answers), "answered", result)


def reject(session: QuestionHost | RemoteSession, question_id: str) -> None:
    """``POST .../questions/{id}/reject``."""
    if isinstance(session, RemoteSession):
        raise Questions.unknown(question_id)
    _, request = _lookup(session, question_id)
    _reject(session, request)
