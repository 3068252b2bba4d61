"""Message updates -> message items.

ACP v1 streams messages as chunks (`user_message_chunk`, `agent_message_chunk`, `agent_thought_chunk`);
ACP v2 adds whole-message upserts (`user_message`, `agent_message`, `agent_thought`) whose content
replaces what the chunks built up. Rules:

- A message item starts at its first chunk (item.started with that chunk's content) and gets one
  item.delta per non-empty text chunk (public reasoning included, private reasoning never).
- Chunks continue the open item when they carry its messageId; without messageIds (older agents),
  when they are of the same update kind. Thought and text chunks sharing a messageId are one item.
- The item completes with its full content when the message ends: a chunk of another message,
  another item or an error event starting (tool call, plan...), the end of the turn, or
  ``_meta["sandbox-agent/status"]`` = ``"completed"``/``"failed"`` on a chunk. So items complete in
  the order they started, and text said before a tool call is complete before the call shows.
- A chunk for a messageId whose item already completed (a message continued after a tool call)
  starts a new item; its native id gets a ``#<n>`` suffix so that one native id keeps naming one item.

Incoming ``_meta["sandbox-agent/..."]`` on the update is honoured, never required: ``itemId``,
``nativeItemId``, ``parentId``, ``itemKind`` (message/system/status/unknown), ``status`` (a string:
item status; an object ``{label, detail}``: the item's status part) and, on the content block,
``reasoningVisibility``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.events.model import ITEM_DELTA, EventDraft, item_raw, kept_raw
from app.events.text import REPLACEMENT, clean_text, is_high_surrogate

from .content import META_PREFIX, block_to_part, reasoning_visibility
from .items import ItemIds, ItemLifecycle, make_item

CHUNK_KINDS = {
    "user_message_chunk": ("user", False),
    "agent_message_chunk": ("assistant", False),
    "agent_thought_chunk": ("assistant", True),
}
# v2 whole-message upserts and the chunk kind each one continues.
UPSERT_KINDS = {
    "user_message": ("user_message_chunk", "user", False),
    "agent_message": ("agent_message_chunk", "assistant", False),
    "agent_thought": ("agent_thought_chunk", "assistant", True),
}
ITEM_KINDS = frozenset({"message", "system", "status", "unknown"})
ENDING_STATUSES = frozenset({"completed", "failed"})

_ITEM_ID = META_PREFIX + "itemId"
_NATIVE_ID = META_PREFIX + "nativeItemId"
_PARENT_ID = META_PREFIX + "parentId"
_ITEM_KIND = META_PREFIX + "itemKind"
_STATUS = META_PREFIX + "status"


@dataclass(slots=True)
class _Text:
    """Consecutive text (or same-visibility reasoning) chunks, joined only when rendered."""

    type: str
    visibility: str | None
    pieces: list[str]

    def render(self) -> dict[str, Any]:
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        text = self.pieces[0] if self.pieces else ""
        if self.type == "reasoning":
            return {"type": "reasoning", "text": text, "visibility": self.visibility}
        return {"type": "text", "text": text}


@dataclass(slots=True)
class OpenMessage:
    item_id: str
    native_item_id: str | None
    key: str | None  # messageId (or meta nativeItemId) the chunks continue by
    family: str  # the chunk kind, for continuation without ids
    role: str
    kind: str
    parent_id: str | None
    entries: list[Any] = field(default_factory=list)  # _Text or finished part dicts
    status_part: dict[str, Any] | None = None
    raw: list[Any] = field(default_factory=list)
    started: bool = False
    # A high surrogate that ended the last chunk: it joins the low one the next chunk starts with.
    held: str = ""

    def join_text(self, text: str) -> str:
        """The chunk's text as it can be shown: an emoji split across two chunks whole (its first
        half waits for the second), any other lone surrogate as U+FFFD."""
        if self.held:
            text = self.held + text
            self.held = ""
        if text and is_high_surrogate(text[-1]):
            self.held = text[-1]
            text = text[:-1]
        return clean_text(text)

    def add_text(self, part_type: str, visibility: str | None, text: str) -> None:
        if not text:
            return  # an empty chunk adds no part (a status-only message has just its status part)
        entries = self.entries
        if entries:
            last = entries[-1]
            if type(last) is _Text and last.type == part_type and last.visibility == visibility:
                last.pieces.append(text)
                return
        entries.append(_Text(part_type, visibility, [text]))

    def add_part(self, part: dict[str, Any]) -> None:
        kind = part["type"]
        if kind == "text":
            self.add_text("text", None, part["text"])
        elif kind == "reasoning":
            self.add_text("reasoning", part["visibility"], part["text"])
        else:
            self.entries.append(part)

    def content(self) -> list[dict[str, Any]]:
        parts = [entry.render() if type(entry) is _Text else dict(entry) for entry in self.entries]
        if self.status_part is not None:
            parts.insert(0, dict(self.status_part))
        return parts


def status_part(value: Any) -> dict[str, Any] | None:
    """``_meta["sandbox-agent/status"]`` as a legacy status part, when it is an object with a label."""
    if not isinstance(value, dict):
        return None
    label = value.get("label")
    if not isinstance(label, str):
        return None
    detail = value.get("detail")
    return {"type": "status", "label": label, "detail": detail if isinstance(detail, str) else None}


class MessageAssembler:
    def __init__(self, ids: ItemIds, lifecycle: ItemLifecycle) -> None:
        self._ids = ids
        self._lifecycle = lifecycle
        self.open: OpenMessage | None = None
        self._closed: set[str] = set()
        self._segments: dict[str, int] = {}
        # The prompt text of the running turn: a v2 agent replays it as `user_message`, which the
        # bridge has already shown as the turn's user item.
        self.user_echo: str | None = None

    # ---- chunks ----------------------------------------------------------------------------
    def more_text(self, update: dict[str, Any], raw: Any) -> list[EventDraft] | None:
        """What ``chunk`` does with the common chunk of a stream, in fewer steps: more text (ASCII,
        so no surrogate to mend) for the open, started message of the same messageId, from a
        non-reasoning chunk without ``_meta``. None when the chunk is any other: ``chunk`` decides."""
        current = self.open
        if current is None or not current.started or current.held:
            return None
        key = update.get("messageId")
        if key != current.key or type(key) is not str or not key:
            return None
        block = update.get("content")
        if type(block) is not dict or block.get("type") != "text":
            return None
        text = block.get("text")
        if type(text) is not str or not text.isascii():
            return None
        current.add_text("text", None, text)
        current.raw.append(kept_raw(raw))
        if text and current.kind == "message":
            return [self._lifecycle.delta_draft(current.item_id, current.native_item_id, text, raw)]
        return []

    def chunk(
        self,
        update: dict[str, Any],
        raw: Any,
        role: str,
        reasoning: bool,
        default_kind: str = "message",
    ) -> list[EventDraft]:
        update_kind = update["sessionUpdate"]
        meta = update.get("_meta")
        if type(meta) is not dict:
            meta = None
        key = update.get("messageId")
        if type(key) is not str or not key:
            key = meta.get(_NATIVE_ID) if meta else None
            if type(key) is not str or not key:
                key = None
        out: list[EventDraft] = []
        current = self.open
        if current is None or not (
            key == current.key if (key is not None or current.key is not None) else current.family == update_kind
        ):
            if current is not None:
                out = self.close()
            current = self._start(update_kind, key, role, meta, default_kind)
        block = update.get("content")
        delta: str | None = None
        if type(block) is dict and block.get("type") == "text" and type(text := block.get("text")) is str:
            if current.held or not text.isascii():  # (ASCII text holds no surrogate)
                text = current.join_text(text)
            if reasoning:
                visibility = reasoning_visibility(block, reasoning_visibility(update))
                current.add_text("reasoning", visibility, text)
                if visibility == "public":
                    delta = text
            else:
                current.add_text("text", None, text)
                delta = text
        else:
            current.add_part(block_to_part(block, reasoning=reasoning))
        status = meta.get(_STATUS) if meta else None
        if status is not None and type(status) is not str:
            part = status_part(status)
            if part is not None:
                current.status_part = part
        current.raw.append(kept_raw(raw))
        if not current.started:
            current.started = True
            out.extend(self._lifecycle.started(self._item(current, "in_progress"), raw=raw))
        if delta and current.kind == "message":
            out.append(self._lifecycle.delta_draft(current.item_id, current.native_item_id, delta, raw))
        if type(status) is str and status in ENDING_STATUSES:
            out.extend(self.close(status))
        return out

    def _start(
        self, update_kind: str, key: str | None, role: str, meta: dict[str, Any] | None, default_kind: str
    ) -> OpenMessage:
        native = key
        if native is not None and native in self._closed:
            n = self._segments.get(native, 1) + 1
            self._segments[native] = n
            native = f"{native}#{n}"
        item_id = meta.get(_ITEM_ID) if meta else None
        if type(item_id) is str and item_id:
            self._ids.bind(native, item_id)
        else:
            item_id = self._ids.for_native(native)
        parent = meta.get(_PARENT_ID) if meta else None
        kind = meta.get(_ITEM_KIND) if meta else None
        if kind not in ITEM_KINDS:
            kind = "status" if meta and status_part(meta.get(_STATUS)) is not None else default_kind
        if kind == "system":
            role = "system"
        current = OpenMessage(
            item_id=item_id,
            native_item_id=native,
            key=key,
            family=update_kind,
            role=role,
            kind=kind,
            parent_id=self._ids.parent(parent) if type(parent) is str and parent else None,
        )
        self.open = current
        return current

    # ---- v2 whole-message upserts -------------------------------------------------------------
    def replace(self, update: dict[str, Any], raw: Any) -> list[EventDraft]:
        """The content replaces what the chunks built up (v2 ``user_message``/``agent_message``/``agent_thought``)."""
        family, role, reasoning = UPSERT_KINDS[update["sessionUpdate"]]
        message_id = update["messageId"]
        content = update.get("content")
        blocks = content if isinstance(content, list) else [] if content is None else [content]
        if role == "user" and self.user_echo is not None and _plain_text(blocks) == self.user_echo:
            self.user_echo = None
            self._closed.add(message_id)
            return []  # the replayed prompt: already shown as the turn's user item
        meta = update.get("_meta") if isinstance(update.get("_meta"), dict) else None
        out: list[EventDraft] = []
        current = self.open
        if current is None or current.key != message_id:
            out.extend(self.close())
            current = self._start(family, message_id, role, meta, "message")
        current.entries = []
        for block in blocks:
            current.add_part(block_to_part(block, reasoning=reasoning))
        current.raw.append(kept_raw(raw))
        if not current.started:
            current.started = True
            out.extend(self._lifecycle.started(self._item(current, "in_progress"), raw=raw))
        status = meta.get(_STATUS) if meta else None
        if type(status) is str and status in ENDING_STATUSES:
            out.extend(self.close(status))
        return out

    # ---- ending ------------------------------------------------------------------------------
    def close(self, status: str = "completed") -> list[EventDraft]:
        current = self.open
        if current is None:
            return []
        self.open = None
        if current.key is not None:
            self._closed.add(current.key)
        if current.held:  # the second half never came
            current.held = ""
            current.add_text(*_last_text_kind(current), REPLACEMENT)
        return self._lifecycle.completed(self._item(current, status), raw=item_raw(current.raw))

    @staticmethod
    def _item(current: OpenMessage, status: str) -> dict[str, Any]:
        return make_item(
            item_id=current.item_id,
            native_item_id=current.native_item_id,
            kind=current.kind,
            role=current.role,
            content=current.content(),
            status=status,
            parent_id=current.parent_id,
        )


def _last_text_kind(current: OpenMessage) -> tuple[str, str | None]:
    for entry in reversed(current.entries):
        if type(entry) is _Text:
            return entry.type, entry.visibility
    return "text", None


def _plain_text(blocks: list[Any]) -> str:
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and "text" in b)


__all__ = ["CHUNK_KINDS", "ITEM_DELTA", "UPSERT_KINDS", "MessageAssembler", "OpenMessage", "status_part"]
