"""Per-session translation state: ACP traffic in, legacy event drafts out. No I/O.

The session layer feeds every raw ACP message here in wire order and appends what comes back.
Update kinds are dispatched through ``UPDATE_HANDLERS``; each handler is a pure function of the
translator state and the update.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .drafts import AGENT_UNPARSED, TURN_ENDED, TURN_STARTED, EventDraft
from .items import ItemIds, ItemLifecycle, make_item
from .messages import CHUNK_KINDS, MessageAssembler


@dataclass(slots=True)
class SessionState:
    """What ACP tells about the session outside events (SessionInfo fields and kept state)."""

    title: str | None = None
    updated_at_ms: int | None = None
    mode: str | None = None
    model: str | None = None
    available_commands: list[Any] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    config_options: list[Any] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


UpdateHandler = Callable[["SessionTranslator", dict[str, Any], Any], list[EventDraft]]
UPDATE_HANDLERS: dict[str, UpdateHandler] = {}


def update_handler(*kinds: str) -> Callable[[UpdateHandler], UpdateHandler]:
    def register(fn: UpdateHandler) -> UpdateHandler:
        for kind in kinds:
            UPDATE_HANDLERS[kind] = fn
        return fn

    return register


def raw_hash(raw: Any) -> str | None:
    if raw is None:
        return None
    text = raw if isinstance(raw, str | bytes) else repr(raw)
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return "sha256:" + hashlib.sha256(data).hexdigest()


class SessionTranslator:
    def __init__(self) -> None:
        self.ids = ItemIds()
        self.lifecycle = ItemLifecycle()
        self.messages = MessageAssembler(self.ids, self.lifecycle)
        self.state = SessionState()
        self.user_messages = 0
        # Room for the richer translators (tool calls, plans) to keep their own state.
        self.scratch: dict[str, Any] = {}

    # ---- ACP -> legacy -------------------------------------------------------------------
    def session_update(self, params: Any, raw: Any) -> list[EventDraft]:
        """One `session/update` notification."""
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or not isinstance(update.get("sessionUpdate"), str):
            return self.unparsed("session/update without an update object", "session/update", raw)
        kind = update["sessionUpdate"]
        if kind in CHUNK_KINDS:
            return self.messages.chunk(update, raw)
        handler = UPDATE_HANDLERS.get(kind)
        if handler is None:
            return self.messages.close() + self.unparsed(f"unknown sessionUpdate: {kind}", "session/update", raw)
        try:
            return handler(self, update, raw)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # A payload that does not have the shape its kind promises: reported, never fatal.
            return self.unparsed(f"invalid {kind}: {exc}", "session/update", raw)

    def unparsed(self, error: str, location: str, raw: Any) -> list[EventDraft]:
        data = {"error": error, "location": location, "raw_hash": raw_hash(raw)}
        return [EventDraft(AGENT_UNPARSED, data, synthetic=True, raw=raw)]

    # ---- turns ---------------------------------------------------------------------------
    def turn_started(self, turn_id: str, text: str, parts: list[dict[str, Any]], raw: Any) -> list[EventDraft]:
        """The synthetic turn.started and the user's message as a user item."""
        out = self.messages.close()
        out.append(EventDraft(TURN_STARTED, {"phase": "started", "turn_id": turn_id}, synthetic=True, raw=raw))
        if text.strip() or parts:
            self.user_messages += 1
            native = f"user_{self.user_messages}"
            item = make_item(
                item_id=self.ids.for_native(native),
                native_item_id=native,
                kind="message",
                role="user",
                content=[{"type": "text", "text": text}, *parts] if text else list(parts),
                status="in_progress",
            )
            out.extend(self.lifecycle.started(item, raw=raw, synthetic=True))
            done = dict(item, status="completed")
            out.extend(self.lifecycle.completed(done, raw=raw, synthetic=True))
        return out

    def turn_ended(self, turn_id: str, metadata: dict[str, Any], raw: Any) -> list[EventDraft]:
        out = self.flush()
        data = {"phase": "ended", "turn_id": turn_id, "metadata": metadata}
        out.append(EventDraft(TURN_ENDED, data, synthetic=True, raw=raw))
        return out

    def flush(self) -> list[EventDraft]:
        """Close whatever is open (the end of a turn or of the session)."""
        out = self.messages.close()
        for hook in FLUSH_HOOKS:
            out.extend(hook(self))
        return out


FLUSH_HOOKS: list[Callable[[SessionTranslator], list[EventDraft]]] = []


# ---- session state updates (kept, no events) ----------------------------------------------
@update_handler("session_info_update")
def _session_info(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    if "title" in update:
        t.state.title = update["title"]
    if "updatedAt" in update:
        t.state.extra["updatedAt"] = update["updatedAt"]
    return []


@update_handler("current_mode_update")
def _current_mode(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    mode = update.get("currentModeId", update.get("modeId"))
    if isinstance(mode, str):
        t.state.mode = mode
    return []


@update_handler("config_option_update")
def _config_options(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    options = update.get("configOptions")
    if isinstance(options, list):
        t.state.config_options = options
        apply_config_options(t.state, options)
    return []


@update_handler("available_commands_update")
def _commands(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    commands = update.get("availableCommands")
    t.state.available_commands = commands if isinstance(commands, list) else []
    return []


@update_handler("usage_update")
def _usage(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    t.state.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}
    return []


def apply_config_options(state: SessionState, options: list[Any]) -> None:
    """Config options with category mode/model set SessionInfo agentMode/model."""
    for option in options:
        if not isinstance(option, dict):
            continue
        value = option.get("currentValue")
        if not isinstance(value, str):
            continue
        if option.get("category") == "mode":
            state.mode = value
        elif option.get("category") == "model":
            state.model = value
