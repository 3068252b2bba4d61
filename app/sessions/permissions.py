"""Permissions: ACP `session/request_permission` <-> legacy permission.requested/resolved and replies.

- The request is recorded as ``permission.requested`` in wire order. Then, without asking anyone:
  ``permissionMode: bypass`` approves it (``once``); a request matching an earlier ``always`` grant is
  approved for the session (legacy cache keys); with ``acceptEdits`` a file change is approved for the
  session and its ``permission.requested`` is not shown (legacy codex behaviour).
- Otherwise it waits for ``POST .../permissions/{id}/reply``, whose reply picks an option by kind.
- Every answer records one synthetic ``permission.resolved`` (a cancel resolves as ``reject``).

``permission_id`` is the agent's own id when it gives one (``_meta["sandbox-agent/permissionId"]``, else
the tool call id), made unique in the session; otherwise ``permission_<n>``.
"""

from __future__ import annotations

from typing import Any

from app.errors import InvalidRequest
from app.translate.drafts import PERMISSION_REQUESTED, PERMISSION_RESOLVED
from app.translate.hitl import (
    CANCELLED_OUTCOME,
    PermissionInfo,
    ToolCallMemory,
    permission_data,
    permission_info,
    select_option,
)

from . import held_permissions as held
from . import services
from .hitl import HumanRequest, RequestBook, response_raw
from .session import Session

METHOD = "session/request_permission"
STATE_KEY = "permissions"
TOOLS_KEY = "permissions.tool_calls"


class Permissions(RequestBook):
    kind = "permission"

    def __init__(self) -> None:
        super().__init__()
        self.always: set[str] = set()  # cache keys of `always` grants

    def cancelled(self, session: Session, request: HumanRequest) -> None:
        _record_resolved(session, request, "reject", {"outcome": dict(CANCELLED_OUTCOME)})


def book(session: Session) -> Permissions:
    state = session.extensions.get(STATE_KEY)
    if state is None:
        state = session.extensions[STATE_KEY] = Permissions()
    return state  # type: ignore[no-any-return]


def tool_memory(session: Session) -> ToolCallMemory:
    memory = session.extensions.get(TOOLS_KEY)
    if memory is None:
        memory = session.extensions[TOOLS_KEY] = ToolCallMemory()
    return memory  # type: ignore[no-any-return]


def _record_resolved(session: Session, request: HumanRequest, status: str, result: Any) -> None:
    info: PermissionInfo = request.info
    data = permission_data(request.public_id, info.action, status, info.metadata)
    session.record_one(PERMISSION_RESOLVED, data, synthetic=True, raw=response_raw(request, result))


def _answer(session: Session, request: HumanRequest, reply: str) -> None:
    outcome, status = select_option(request.info.options, reply)
    result = {"outcome": outcome}
    if request.book.finish(session, request, result):
        _record_resolved(session, request, status, result)


# ---- agent side ----------------------------------------------------------------------------------
def observe(session: Session, message: dict[str, Any]) -> None:
    params = message.get("params")
    if not isinstance(params, dict):
        return  # `handle` answers invalid params
    tool_call: dict[str, Any] = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    call_id = tool_call.get("toolCallId")
    if (
        session.spec.profile.announces_tool_calls
        and isinstance(call_id, str)
        and not tool_memory(session).get(call_id)
        and not session.ended
    ):
        held.hold(session, call_id, message, lambda: _observe(session, message))
        return
    _observe(session, message)


def _observe(session: Session, message: dict[str, Any]) -> None:
    params = message["params"]
    tool_call: dict[str, Any] = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    session.translator.tools.permission_tool_call(tool_call)
    remembered = tool_memory(session).get(tool_call.get("toolCallId"))
    info = permission_info(params, remembered, session.spec.profile.permission_actions)
    permissions = book(session)
    request = permissions.add(
        session, message, info, info.candidates, "permission", {"outcome": dict(CANCELLED_OUTCOME)}
    )
    mode = session.config.permission_mode
    if mode == "acceptEdits" and info.file_change and not session.ended:
        _answer(session, request, "always")  # legacy: shown only as the resolved event
        return
    data = permission_data(request.public_id, info.action, "requested", info.metadata)
    session.record_one(PERMISSION_REQUESTED, data, synthetic=False, raw=message)
    if session.ended:
        session.cancel_one(request.request_id)
    elif mode == "bypass":
        _answer(session, request, "once")
    elif info.cache_keys & permissions.always:
        _answer(session, request, "always")


async def handle(session: Session, params: Any, request_id: Any) -> Any:
    await held.released(session, request_id)
    return await book(session).wait(session, request_id, lambda s, r: _answer(s, r, "reject"))


_TOOL_UPDATES = frozenset({"tool_call", "tool_call_update"})


def _remember_tool_calls(session: Session, message: dict[str, Any]) -> None:
    params = message.get("params")
    update = params.get("update") if type(params) is dict else None
    # Checked here first: this runs for every update, most of them message chunks.
    if type(update) is dict and update.get("sessionUpdate") in _TOOL_UPDATES:
        tool_memory(session).update(update)
        held.announced(session, update.get("toolCallId"))


# ---- HTTP side -----------------------------------------------------------------------------------
def reply(session: Session, permission_id: str, reply: str) -> None:
    """``POST .../permissions/{id}/reply`` after the session lookup (legacy §7.1 order)."""
    permissions: Permissions | None = session.extensions.get(STATE_KEY)
    if permissions is None:
        raise InvalidRequest(f"unknown permission id: {permission_id}")
    request = permissions.lookup(permission_id)
    if reply == "always":
        permissions.always |= request.info.cache_keys
    permissions.check_session(session, request)
    _answer(session, request, reply)


services.register(services.ClientService(METHOD, handle, observe))
services.UPDATE_OBSERVERS.append(_remember_tool_calls)
