"""Message chunks (`user_message_chunk`, `agent_message_chunk`, `agent_thought_chunk`) -> message items.

A message item starts at its first chunk, gets one item.delta per text chunk, and completes with the
full content when the message ends: another update kind, a new messageId, or the end of the turn.
Chunks that share a messageId belong to one item even when thoughts and text interleave.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .content import block_to_part, merge_part, meta_get, part_delta
from .drafts import EventDraft
from .items import ItemIds, ItemLifecycle, make_item

CHUNK_KINDS = {
    "user_message_chunk": ("user", False),
    "agent_message_chunk": ("assistant", False),
    "agent_thought_chunk": ("assistant", True),
}


@dataclass(slots=True)
class OpenMessage:
    item_id: str
    native_item_id: str | None
    message_id: str | None
    update_kind: str
    role: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    raw: list[Any] = field(default_factory=list)


class MessageAssembler:
    def __init__(self, ids: ItemIds, lifecycle: ItemLifecycle) -> None:
        self._ids = ids
        self._lifecycle = lifecycle
        self.open: OpenMessage | None = None

    def _continues(self, update_kind: str, message_id: str | None) -> bool:
        current = self.open
        if current is None:
            return False
        if message_id is not None or current.message_id is not None:
            return message_id == current.message_id
        return current.update_kind == update_kind

    def chunk(self, update: dict[str, Any], raw: Any) -> list[EventDraft]:
        update_kind = update["sessionUpdate"]
        role, reasoning = CHUNK_KINDS[update_kind]
        message_id = update.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            message_id = None
        out: list[EventDraft] = []
        if not self._continues(update_kind, message_id):
            out.extend(self.close())
            native = meta_get(update, "nativeItemId") or message_id
            item_id = meta_get(update, "itemId") or self._ids.for_native(native)
            self.open = OpenMessage(item_id, native, message_id, update_kind, role)
        current = self.open
        assert current is not None
        part = block_to_part(update.get("content"), reasoning=reasoning)
        merge_part(current.parts, part)
        current.raw.append(raw)
        first = not self._lifecycle.is_started(current.item_id)
        if first:
            out.extend(self._lifecycle.started(self._item(current, "in_progress"), raw=raw))
        text = part_delta(part)
        if text is not None and (not first or text):
            out.extend(self._lifecycle.delta(current.item_id, current.native_item_id, text, raw=raw))
        return out

    def replace(self, update: dict[str, Any], raw: Any) -> list[EventDraft]:
        """ACP v2 whole-message upsert: the content replaces what the chunks built up."""
        update_kind = update["sessionUpdate"]
        role = "user" if update_kind == "user_message" else "assistant"
        reasoning = update_kind == "agent_thought"
        message_id = update.get("messageId") if isinstance(update.get("messageId"), str) else None
        out: list[EventDraft] = []
        chunk_kind = {"user_message": "user_message_chunk", "agent_message": "agent_message_chunk"}.get(
            update_kind, "agent_thought_chunk"
        )
        if not self._continues(chunk_kind, message_id):
            out.extend(self.close())
            item_id = self._ids.for_native(message_id)
            self.open = OpenMessage(item_id, message_id, message_id, chunk_kind, role)
        current = self.open
        assert current is not None
        content = update.get("content")
        blocks = content if isinstance(content, list) else [content] if content is not None else []
        current.parts = []
        for block in blocks:
            merge_part(current.parts, block_to_part(block, reasoning=reasoning))
        current.raw.append(raw)
        if not self._lifecycle.is_started(current.item_id):
            out.extend(self._lifecycle.started(self._item(current, "in_progress"), raw=raw))
        return out

    def close(self) -> list[EventDraft]:
        current = self.open
        if current is None:
            return []
        self.open = None
        raw = current.raw if len(current.raw) > 1 else (current.raw[0] if current.raw else None)
        return self._lifecycle.completed(self._item(current, "completed"), raw=raw)

    @staticmethod
    def _item(current: OpenMessage, status: str) -> dict[str, Any]:
        return make_item(
            item_id=current.item_id,
            native_item_id=current.native_item_id,
            kind="message",
            role=current.role,
            content=copy.deepcopy(current.parts),
            status=status,
        )
