"""Legacy events that ACP has no message for, carried by ``sandbox-agent`` extensions.

An agent that knows the legacy model (the built-in mock does) can ask for them; no agent has to.

- ``error`` events: the extension notification ``_sandbox-agent/error``
  ``{sessionId, message, code?, details?}``.
- ``session.ended`` (the agent ends the session without exiting): ``_meta["sandbox-agent/sessionEnd"]``
  ``{terminatedBy?, reason?, message?, exitCode?, stderr?}`` on the ``session/prompt`` result. It
  takes the place of that turn's turn.ended; the reason defaults from the stopReason.
- no ``turn.ended``: ``_meta["sandbox-agent/turnEnded"]: false`` on the ``session/prompt`` result. The
  legacy mock recorded none when its script ended asking a person (behavior §10.1); its requests stay
  pending after the prompt.
- ``agent.unparsed``: ``_meta["sandbox-agent/unparsed"]`` ``{error, location, rawHash?}`` on any
  ``session/update``: the agent says the payload is one the legacy model cannot show.
- ``synthetic``: ``_meta["sandbox-agent/synthetic"]: true`` on the notification's params marks the
  events made from it as daemon-made (``source: daemon``).

JSON-RPC errors answering ``session/prompt`` may name the legacy error type in
``error.data._meta["sandbox-agent/errorType"]``; it becomes the error event's ``code``.
"""

from __future__ import annotations

from typing import Any

from app.events.model import ERROR, SESSION_ENDED, EventDraft

from .content import META_PREFIX

ERROR_NOTIFICATION = "_sandbox-agent/error"
SESSION_END = META_PREFIX + "sessionEnd"
TURN_ENDED = META_PREFIX + "turnEnded"
UNPARSED = META_PREFIX + "unparsed"
SYNTHETIC = META_PREFIX + "synthetic"
ERROR_TYPE = META_PREFIX + "errorType"

END_REASONS = ("completed", "error", "terminated")
# Legacy SessionEndReason from an ACP StopReason when the agent does not name one.
STOP_TO_REASON = {"end_turn": "completed", "cancelled": "terminated", "refusal": "error"}


def is_synthetic(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get(SYNTHETIC) is True


def agent_error(params: Any, raw: Any) -> EventDraft | None:
    """``_sandbox-agent/error`` -> an ``error`` event; None when the params lack a message."""
    if not isinstance(params, dict) or not isinstance(params.get("message"), str):
        return None
    code = params.get("code")
    data = {
        "message": params["message"],
        "code": code if isinstance(code, str) else None if code is None else str(code),
        "details": params.get("details"),
    }
    return EventDraft(ERROR, data, synthetic=is_synthetic(params), raw=raw)


def rpc_error_data(code: Any, message: str, data: Any) -> dict[str, Any]:
    """ErrorData for a JSON-RPC error the agent answered. A generic message ("Internal error") gives
    way to the agent's own words in ``data`` (a string, or its ``message``/``error``/``details``)."""
    meta = data.get("_meta") if isinstance(data, dict) else None
    error_type = meta.get(ERROR_TYPE) if isinstance(meta, dict) else None
    return {
        "message": agent_message(message, data),
        "code": error_type if isinstance(error_type, str) else str(code),
        "details": data,
    }


GENERIC_MESSAGES = frozenset({"internal error", "server error", "unknown error", ""})


def agent_message(message: str, data: Any) -> str:
    if message.strip().lower() not in GENERIC_MESSAGES:
        return message
    if isinstance(data, str) and data.strip():
        return data.strip()
    if isinstance(data, dict):
        for key in ("message", "error", "details"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return message


def session_end(result_meta: Any, stop_reason: Any, raw: Any) -> EventDraft | None:
    """The agent-made ``session.ended`` a prompt result asks for, if any."""
    end = result_meta.get(SESSION_END) if isinstance(result_meta, dict) else None
    if not isinstance(end, dict):
        return None
    reason = end.get("reason")
    if reason not in END_REASONS:
        reason = STOP_TO_REASON.get(stop_reason, "completed")
    terminated_by = end.get("terminatedBy")
    data: dict[str, Any] = {
        "reason": reason,
        "terminated_by": terminated_by if terminated_by in ("agent", "daemon") else "agent",
    }
    if reason == "error":
        message = end.get("message")
        data["message"] = message if isinstance(message, str) else "the agent ended the session"
        if isinstance(end.get("exitCode"), int):
            data["exit_code"] = end["exitCode"]
        stderr = end.get("stderr")
        if isinstance(stderr, dict):
            names = (("head", "head"), ("tail", "tail"), ("truncated", "truncated"), ("total_lines", "totalLines"))
            data["stderr"] = {key: stderr[src] for key, src in names if src in stderr}
    return EventDraft(SESSION_ENDED, data, synthetic=True, raw=raw)


def turn_end_omitted(result_meta: Any) -> bool:
    """The prompt result asks for no turn.ended."""
    return isinstance(result_meta, dict) and result_meta.get(TURN_ENDED) is False


def unparsed_request(update: dict[str, Any]) -> dict[str, Any] | None:
    """``_meta["sandbox-agent/unparsed"]`` of an update, when present."""
    meta = update.get("_meta")
    if type(meta) is not dict or UNPARSED not in meta:
        return None
    value = meta[UNPARSED]
    return value if isinstance(value, dict) else {}
