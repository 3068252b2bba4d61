"""Per-session translation state: ACP traffic in, legacy event drafts out. No I/O.

The session layer feeds every raw ACP message here in wire order and appends what comes back.
Update kinds are dispatched through ``UPDATE_HANDLERS`` (at the end of this module: add a new
translation there); each handler is a pure function of the
translator state and the update. Every draft carries the ACP message(s) it came from as ``raw``.

What becomes what (ACP ``sessionUpdate`` -> legacy):

- ``*_message_chunk``, v2 ``user_message``/``agent_message``/``agent_thought``: message items
  (``messages.py``);
- ``tool_call``, ``tool_call_update``, v2 ``tool_call_content_chunk``: tool_call and tool_result
  items (``tools.py``);
- ``plan``, v2 ``plan_update``/``plan_removed``, ``notice``, ``compaction_update``: status items
  (``status.py``); ``compaction_summary_chunk``: a system item;
- ``session_info_update``, ``current_mode_update``, ``config_option_update``,
  ``available_commands_update``, ``usage_update``, v2 ``state_update``: session state
  (``SessionState``), no event;
- anything else, or a payload without what its variant requires: ``agent.unparsed``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.events.envelope import dumps
from app.events.model import AGENT_UNPARSED, TURN_ENDED, TURN_STARTED, EventDraft
from app.events.text import clean_value

from . import extensions, status
from .checks import block_problem, update_problem
from .items import ItemIds, ItemLifecycle, make_item
from .messages import CHUNK_KINDS, UPSERT_KINDS, MessageAssembler
from .prompt import attachments_text
from .tools import DEFAULT_STYLE, ToolCalls, ToolStyle
from .usage import LEGACY_USAGE_LABEL, Totals, TurnUsage, legacy_status_detail


@dataclass(slots=True)
class SessionState:
    """What ACP tells about the session outside events (SessionInfo fields and kept state)."""

    title: str | None = None
    title_set: bool = False  # session_info_update sent a title (null included: it clears)
    updated_at_ms: int | None = None
    mode: str | None = None  # the agent's current mode, whatever told it
    agent_mode: str | None = None  # the mode as changed by the agent during the session
    # False when the agent's own modes are permission modes (claude, codex): they never show as
    # SessionInfo agentMode.
    modes_are_agent_modes: bool = True
    model: str | None = None
    available_commands: list[Any] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    config_options: list[Any] = field(default_factory=list)
    # Tokens and cost: the session's totals, and what the last turn used (``usage.py``).
    totals: Totals = field(default_factory=Totals)
    last_turn: TurnUsage | None = None
    plans: dict[str, Any] = field(default_factory=dict)
    agent_state: str | None = None  # v2 state_update: idle / running / requires_action
    info_meta: dict[str, Any] = field(default_factory=dict)
    # The last raw message of each state update kind (kept, not logged as events).
    raw: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UserItemStyle:
    """What the turn's user item looks like. By default the bridge's own: ``user_<n>`` with n counting
    the messages that have content, synthetic, the text as sent (legacy claude and amp)."""

    native: str = "user_{n}"
    count_every_message: bool = False  # n counts empty messages too
    synthetic: bool = True
    trim: bool = False
    attachments_as_text: bool = False  # listed in the text (legacy §3.8) instead of as parts


# The legacy mock's own user item (behavior §10.1): `mock_<n>_user` where n counts every message, as
# the mock's other native ids do; from the agent (not synthetic); the trimmed text, with the
# attachments listed in it as the legacy mock saw them.
MOCK_USER_ITEM = UserItemStyle(
    "mock_{n}_user", count_every_message=True, synthetic=False, trim=True, attachments_as_text=True
)


UpdateHandler = Callable[["SessionTranslator", dict[str, Any], Any], list[EventDraft]]


def _clean_update(update: dict[str, Any], chunk: bool) -> dict[str, Any]:
    """Lone surrogates out of an update's strings (U+FFFD). A chunk's text keeps its own: the
    message assembler joins a pair split across two chunks first."""
    content = update.get("content")
    text = content.get("text") if chunk and type(content) is dict else None
    cleaned: dict[str, Any] = clean_value(update)  # type: ignore[assignment]
    if type(text) is str and cleaned is not update:
        cleaned["content"] = {**cleaned["content"], "text": text}
    return cleaned


def raw_hash(raw: Any) -> str | None:
    """sha256 of the raw payload: of its text for a stdout line, of its compact JSON otherwise."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        data = raw
    elif isinstance(raw, str):
        data = raw.encode("utf-8", "replace")
    else:
        data = dumps(raw).encode("utf-8", "replace")
    return "sha256:" + hashlib.sha256(data).hexdigest()


class SessionTranslator:
    def __init__(
        self,
        terminal_output: Callable[[str], str | None] | None = None,
        user_item: UserItemStyle = UserItemStyle(),
        tool_style: ToolStyle = DEFAULT_STYLE,
        usage_status: bool = False,
    ) -> None:
        self.tool_style = tool_style
        # Show each turn's token usage as a status item too, as legacy did for codex.
        self.usage_status = usage_status
        self.ids = ItemIds()
        self.lifecycle = ItemLifecycle()
        self.messages = MessageAssembler(self.ids, self.lifecycle)
        self.tools = ToolCalls(self)
        self.state = SessionState()
        self.user_messages = 0
        self.prompts = 0
        self.user_item = user_item
        # The output of a terminal by id, for tool results that show a terminal; set by the
        # session layer (an in-memory lookup, so translation stays pure).
        self.terminal_output = terminal_output
        self._end_of_turn_event = False  # the agent ended the session in place of turn.ended

    # ---- ACP -> legacy -------------------------------------------------------------------
    def session_update(self, params: Any, raw: Any) -> list[EventDraft]:
        """One `session/update` notification."""
        update = params.get("update") if type(params) is dict else None
        if type(update) is not dict:
            return self.unparsed("session/update without an update object", "session/update", raw)
        kind = update.get("sessionUpdate")
        if type(kind) is not str:
            return self.unparsed("session/update without a sessionUpdate kind", "session/update", raw)
        # Only a message whose JSON text has a \uD8xx-\uDFxx escape can hold a lone surrogate.
        text = getattr(raw, "json_text", None)
        if text is None or "\\ud" in text or "\\uD" in text:
            update = _clean_update(update, kind in CHUNK_KINDS)
        if "_meta" in update:
            asked = extensions.unparsed_request(update)
            if asked is not None:
                return self.messages.close() + self._agent_unparsed(asked, raw)
        try:
            chunk = CHUNK_KINDS.get(kind)
            if chunk is not None:
                # The common chunk (more text of the open message) takes the short way.
                more = None if chunk[1] or "_meta" in update else self.messages.more_text(update, raw)
                if more is not None:
                    drafts = more
                else:
                    problem = block_problem(update.get("content"))
                    if problem is not None:
                        return self.unparsed(f"invalid {kind}: {problem}", "session/update", raw)
                    drafts = self.messages.chunk(update, raw, *chunk)
            else:
                handler = UPDATE_HANDLERS.get(kind)
                if handler is None:
                    return self.unparsed(f"unknown sessionUpdate: {kind}", "session/update", raw)
                problem = update_problem(kind, update)
                if problem is not None:
                    return self.unparsed(f"invalid {kind}: {problem}", "session/update", raw)
                drafts = handler(self, update, raw)
        except Exception as exc:
            # A shape the checks let through but translation cannot use: reported, and the session
            # goes on (an exception here would stop reading the agent).
            return self.unparsed(f"could not translate {kind}: {exc!r}", "session/update", raw)
        if "_meta" in params and extensions.is_synthetic(params):
            for draft in drafts:
                if draft.raw is raw:
                    draft.synthetic = True
        return drafts

    def files_wanted(self, params: Any) -> list[str]:
        """The files the next ``session_update(params)`` needs to show exact diffs (see
        ``ToolCalls.files_wanted``); read by the session layer and given with ``supply_files``."""
        update = params.get("update") if type(params) is dict else None
        if type(update) is not dict or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return []
        return self.tools.files_wanted(update)

    def supply_files(self, params: Any, files: dict[str, str | None]) -> None:
        """The text of the files ``files_wanted(params)`` named (None: no such file)."""
        update = params.get("update") if type(params) is dict else None
        call_id = update.get("toolCallId") if type(update) is dict else None
        if isinstance(call_id, str):
            self.tools.supply_files(call_id, files)

    def file_written(self, path: str, before: str | None, after: str) -> None:
        """The agent wrote a whole file through the bridge (``fs/write_text_file``): the exact change
        for the diff of the tool call that made it (see ``ToolCalls.file_written``)."""
        self.tools.file_written(path, before, after)

    def unparsed(self, error: str, location: str, raw: Any) -> list[EventDraft]:
        data = {"error": error, "location": location, "raw_hash": raw_hash(raw)}
        return [EventDraft(AGENT_UNPARSED, data, synthetic=True, raw=raw)]

    def _agent_unparsed(self, asked: dict[str, Any], raw: Any) -> list[EventDraft]:
        error = asked.get("error") if isinstance(asked.get("error"), str) else "unsupported payload"
        location = asked.get("location") if isinstance(asked.get("location"), str) else "session/update"
        given = asked.get("rawHash")
        data = {"error": error, "location": location, "raw_hash": given if isinstance(given, str) else raw_hash(raw)}
        return [EventDraft(AGENT_UNPARSED, data, synthetic=True, raw=raw)]

    def agent_error(self, params: Any, raw: Any) -> list[EventDraft]:
        """The ``_sandbox-agent/error`` extension notification."""
        draft = extensions.agent_error(params, raw)
        if draft is None:
            return self.unparsed(f"invalid {extensions.ERROR_NOTIFICATION}: needs a message", "agent.stdout", raw)
        return [*self.messages.close(), draft]

    # ---- turns ---------------------------------------------------------------------------
    def turn_started(self, turn_id: str, text: str, parts: list[dict[str, Any]], raw: Any) -> list[EventDraft]:
        """The synthetic turn.started and the user's message as a user item."""
        out = self.messages.close()
        self._end_of_turn_event = False
        out.append(EventDraft(TURN_STARTED, {"phase": "started", "turn_id": turn_id}, synthetic=True, raw=raw))
        self.messages.user_echo = text
        self.prompts += 1
        style = self.user_item
        if style.attachments_as_text and parts:
            text, parts = attachments_text(text, [part["path"] for part in parts]), []
        if text.strip() or parts:
            self.user_messages += 1
            native = style.native.format(n=self.prompts if style.count_every_message else self.user_messages)
            shown = text.strip() if style.trim else text
            item = make_item(
                item_id=self.ids.for_native(native),
                native_item_id=native,
                kind="message",
                role="user",
                content=[{"type": "text", "text": shown}, *parts] if shown else list(parts),
                status="in_progress",
            )
            out.extend(self.lifecycle.started(item, raw=raw, synthetic=style.synthetic))
            done = dict(item, status="completed")
            out.extend(self.lifecycle.completed(done, raw=raw, synthetic=style.synthetic))
        return out

    def turn_result(
        self, turn_id: str, result: Any, raw: Any, native_session_id: str | None = None
    ) -> list[EventDraft]:
        """The agent answered the turn's ``session/prompt``: what ends the turn, its stop reason and
        what it used (tokens, cost, context: ``usage.py``) in turn.ended's metadata."""
        answer = result if isinstance(result, dict) else {}
        metadata: dict[str, Any] = {"stopReason": answer.get("stopReason")}
        if isinstance(answer.get("_meta"), dict):
            metadata["meta"] = answer["_meta"]
        used = self.state.last_turn = self.state.totals.end_turn(answer)
        metadata.update(used.metadata())
        out = self.flush()
        if self.usage_status and used.tokens and not extensions.turn_end_omitted(metadata.get("meta")):
            detail = legacy_status_detail(native_session_id, turn_id, used, self.state.totals)
            out += status.usage_item(self, LEGACY_USAGE_LABEL, detail, raw)
        return out + self.turn_ended(turn_id, metadata, raw)

    def turn_ended(self, turn_id: str, metadata: dict[str, Any], raw: Any) -> list[EventDraft]:
        """What ends the turn: open items completed, then turn.ended, or the agent's session.ended
        when the prompt result asks for one (legacy: no turn.ended follows a session.ended), or
        nothing more when it asks for no turn.ended."""
        out = self.flush()
        self.messages.user_echo = None
        ended = extensions.session_end(metadata.get("meta"), metadata.get("stopReason"), raw)
        if ended is not None:
            out.append(ended)
            return out
        if extensions.turn_end_omitted(metadata.get("meta")):
            return out
        # The prompt result's own `_meta` stays in raw (the response), with ACP's other extras.
        shown = {key: value for key, value in metadata.items() if key != "meta"}
        data = {"phase": "ended", "turn_id": turn_id, "metadata": shown}
        out.append(EventDraft(TURN_ENDED, data, synthetic=True, raw=raw))
        return out

    def flush(self) -> list[EventDraft]:
        """Close whatever is open (the end of a turn or of the session)."""
        out = self.messages.close()
        out.extend(self.tools.flush())  # unfinished tool calls end failed
        return out


# ---- items ----------------------------------------------------------------------------------
def _tool_call(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    return t.tools.upsert(update, raw)


def _tool_call_content(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    upsert = {"toolCallId": update["toolCallId"], "_meta": update.get("_meta")}
    return t.tools.upsert(upsert, raw, chunk=update["content"])


def _message_upsert(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    return t.messages.replace(update, raw)


def _compaction_summary(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    return t.messages.chunk(update, raw, "system", False, "system")


# ---- session state updates (kept, no events) ----------------------------------------------
def _keep(t: SessionTranslator, update: dict[str, Any], raw: Any) -> None:
    t.state.raw[update["sessionUpdate"]] = raw


def parse_time_ms(value: Any) -> int | None:
    """An ISO 8601 timestamp as epoch milliseconds (None when it is not one)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _session_info(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    # Patch semantics: an omitted field is unchanged, null clears it.
    if "title" in update and (update["title"] is None or isinstance(update["title"], str)):
        t.state.title = update["title"]
        t.state.title_set = True
    if "updatedAt" in update:
        t.state.updated_at_ms = parse_time_ms(update["updatedAt"])
    if isinstance(update.get("_meta"), dict):
        t.state.info_meta.update(update["_meta"])
    _keep(t, update, raw)
    return []


def _current_mode(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    mode = update.get("currentModeId", update.get("modeId"))
    if isinstance(mode, str):
        t.state.mode = mode
        if t.state.modes_are_agent_modes:
            t.state.agent_mode = mode
    _keep(t, update, raw)
    return []


def _config_options(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    options = update["configOptions"]
    t.state.config_options = options
    apply_config_options(t.state, options)
    _keep(t, update, raw)
    return []


def _commands(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    t.state.available_commands = update["availableCommands"]
    _keep(t, update, raw)
    return []


def _usage(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    t.state.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}
    t.state.totals.usage_update(update)
    _keep(t, update, raw)
    return []


def _agent_state(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    # v2: the turn's end is the prompt's business here; the state is kept for the record.
    t.state.agent_state = update["state"]
    _keep(t, update, raw)
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
            if state.modes_are_agent_modes:
                state.agent_mode = value
        elif option.get("category") == "model":
            state.model = value


# ACP ``sessionUpdate`` kind -> its translation (message chunks are ``CHUNK_KINDS``, handled first).
UPDATE_HANDLERS: dict[str, UpdateHandler] = {
    "tool_call": _tool_call,
    "tool_call_update": _tool_call,
    "tool_call_content_chunk": _tool_call_content,
    "user_message": _message_upsert,
    "agent_message": _message_upsert,
    "agent_thought": _message_upsert,
    "compaction_summary_chunk": _compaction_summary,
    "plan": status.plan,
    "plan_update": status.plan_update,
    "plan_removed": status.plan_removed,
    "notice": status.notice,
    "compaction_update": status.compaction_update,
    "session_info_update": _session_info,
    "current_mode_update": _current_mode,
    "config_option_update": _config_options,
    "available_commands_update": _commands,
    "usage_update": _usage,
    "state_update": _agent_state,
}


__all__ = [
    "UPDATE_HANDLERS",
    "UPSERT_KINDS",
    "SessionState",
    "SessionTranslator",
    "apply_config_options",
    "raw_hash",
]
