"""Builders for translate/ unit tests: ACP notifications in, legacy drafts out."""

from __future__ import annotations

from typing import Any

from app.events.model import EventDraft
from app.translate.session_translator import SessionTranslator

SESSION = "native-1"


def notification(update: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update, **params}}


def feed(t: SessionTranslator, *updates: dict[str, Any]) -> list[EventDraft]:
    """Each update as its own session/update notification (the notification is the draft's raw)."""
    out: list[EventDraft] = []
    for update in updates:
        message = notification(update)
        out += t.session_update(message["params"], message)
    return out


def text_chunk(
    text: str, message_id: str | None = None, kind: str = "agent_message_chunk", **extra: Any
) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def types(drafts: list[EventDraft]) -> list[str]:
    return [d.type for d in drafts]


def items(drafts: list[EventDraft], event_type: str = "item.completed") -> list[dict[str, Any]]:
    return [d.data["item"] for d in drafts if d.type == event_type]


def end_turn(t: SessionTranslator, **metadata: Any) -> list[EventDraft]:
    return t.turn_ended("turn_1", {"stopReason": "end_turn", **metadata}, raw={"result": {"stopReason": "end_turn"}})
