"""Permissions: ACP `session/request_permission` <-> legacy permission.requested/resolved and replies.

- The request is recorded as ``permission.requested`` in wire order. Then, without asking anyone:
  ``permissionMode: bypass`` approves it (``once``) unless the profile says the agent asks anyway
  (the mock, as legacy's); a request matching an earlier ``always`` grant is
  approved for the session (legacy cache keys); with ``acceptEdits`` a file change is approved for the
  session and its ``permission.requested`` is not shown (legacy codex behaviour).
- Otherwise it waits for ``POST .../permissions/{id}/reply``, whose reply picks an option by kind.
- Every answer records one synthetic ``permission.resolved`` (a cancel resolves as ``reject``).

``permission_id`` is the agent's own id when it gives one (``_meta["sandbox-agent/permissionId"]``, else
the tool call id), made unique in the session; otherwise ``permission_<n>``.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.events.model import PERMISSION_REQUESTED, PERMISSION_RESOLVED
from app.translate.hitl_shapes import (
    CANCELLED_OUTCOME,
    PermissionInfo,
    ToolCallMemory,
    permission_data,
    permission_info,
    select_option,
)

from .held_permissions import HeldRequests
from .host import SessionHost
from .remote import RemoteSession
from .request_book import HumanRequest, RequestBook, response_raw

METHOD = "session/request_permission"
PermissionRequest = HumanRequest[PermissionInfo]


class Permissions(RequestBook[PermissionInfo]):
    """A session's permission requests, its `always` grants and what it knows of its tool calls."""

    kind = "permission"

    def __init__(self, pending: dict[Any, HumanRequest[Any]]) -> None:
        super().__init__(pending)
        self.always: set[str] = set()  # cache keys of `always` grants
        # Tool names and inputs from earlier tool_call updates (a permission request may omit them).
        self.tool_calls = ToolCallMemory()
        # Requests that came before their tool call, waiting for it (held_permissions).
        self.held = HeldRequests()

    def record_cancelled(self, session: SessionHost, request: PermissionRequest) -> None:
        _record_resolved(session, request, "reject", {"outcome": dict(CANCELLED_OUTCOME)})


class PermissionHost(SessionHost, Protocol):
    """A session with permission requests."""

    @property
    def permissions(self) -> Permissions: ...


def _record_resolved(session: SessionHost, request: PermissionRequest, status: str, result: Any) -> None:
    info = request.info
    data = permission_data(request.public_id, info.action, status, info.metadata)
    session.record_one(PERMISSION_RESOLVED, data, synthetic=True, raw=response_raw(request, result))


def _answer(session: SessionHost, request: PermissionRequest, reply: str) -> None:
    outcome, status = select_option(request.info.options, reply)
    result = {"outcome": outcome}
    if request.book.finish(request, result):
        _record_resolved(session, request, status, result)


# ---- agent side ----------------------------------------------------------------------------------
def observe(session: PermissionHost, message: dict[str, Any]) -> None:
    params = message.get("params")
    if not isinstance(params, dict):
        return  # `handle` answers invalid params
    tool_call: dict[str, Any] = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    call_id = tool_call.get("toolCallId")
    if (
        session.spec.profile.announces_tool_calls
        and isinstance(call_id, str)
        and not session.permissions.tool_calls.get(call_id)
        and not session.ended
    ):
        session.permissions.held.hold(call_id, message, lambda: _observe(session, message))
        return
    _observe(session, message)


def _observe(session: PermissionHost, message: dict[str, Any]) -> None:
    params = message["params"]
    tool_call: dict[str, Any] = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    permissions = session.permissions
    session.translator.tools.permission_tool_call(tool_call)
    remembered = permissions.tool_calls.get(tool_call.get("toolCallId"))
    profile = session.spec.profile
    info = permission_info(params, remembered, profile.permission_actions, profile.permission_metadata)
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
    elif mode == "bypass" and profile.bypass_approves:
        _answer(session, request, "once")
    elif info.cache_keys & permissions.always:
        _answer(session, request, "always")


async def handle(session: PermissionHost, params: Any, request_id: Any) -> Any:
    await session.permissions.held.released(request_id)
    return await session.permissions.wait(session, request_id, lambda s, r: _answer(s, r, "reject"))


_TOOL_UPDATES = frozenset({"tool_call", "tool_call_update"})


def remember_tool_calls(session: PermissionHost, message: dict[str, Any]) -> None:
    """Every `session/update`, before it is translated: keep what tool calls said about themselves."""
    params = message.get("params")
    update = params.get("update") if type(params) is dict else None
    # Checked here first: this runs for every update, most of them message chunks.
    if type(update) is dict and update.get("sessionUpdate") in _TOOL_UPDATES:
        session.permissions.tool_calls.update(update)
        session.permissions.held.announced(update.get("toolCallId"))


# ---- HTTP side -----------------------------------------------------------------------------------
def reply(session: PermissionHost | RemoteSession, permission_id: str, reply: str) -> None:
    """``POST .../permissions/{id}/reply`` after the session lookup (legacy §7.1 order). A session
    another bridge runs holds no request here (``forward`` sends the replies of a live one there)."""
    if isinstance(session, RemoteSession):
        raise Permissions.unknown(permission_id)
    permissions = session.permissions
    request = permissions.lookup(permission_id)
    if reply == "always":
        permissions.always |= request.info.cache_keys
    permissions.check_session(session, request)
    _answer(session, request, reply)
