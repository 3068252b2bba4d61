"""Tool calls: ``tool_call`` / ``tool_call_update`` (and the v2 ``tool_call_content_chunk``) -> a
``tool_call`` item and a ``tool_result`` item.

Every update is an upsert keyed by ``toolCallId``: the first update for an unknown id starts the
call, a repeated ``tool_call`` is an update. Fields sent replace what was known (``content`` and
``locations`` replace whole arrays); omitted or null fields leave it as it was. Content chunks append.

When items start and complete:

1. The **tool_call item** (kind tool_call, role assistant, content ``tool_call{name, arguments,
   call_id}``) starts at the first update of the call.
2. It completes when the call leaves ``pending`` (status in_progress/completed/failed/cancelled),
   or when output arrives; ``arguments`` is then the JSON text of ``rawInput`` as known.
3. The **tool_result item** (kind tool_result, role tool, ``parent_id`` the tool_call item,
   content ``tool_result{call_id, output}`` plus ``file_ref`` parts) starts when the call has output
   (``rawOutput``, or a content chunk) or ends.
4. It completes when the call ends: ``completed`` -> completed; ``failed``/``cancelled`` -> failed.
5. At the end of a turn (the flush) every unfinished call is completed as it stands, its result
   with status ``failed`` (it never reported success): every tool_call item gets its tool_result.
   Updates for a call that already finished change nothing.

The tool **name** is decided once and kept while the title changes: ``_meta["sandbox-agent/toolName"]``,
else the (unstable) ACP ``name``, else a vendor name in ``_meta`` (``_meta.claudeCode.toolName``; the
``mcp__acp__`` prefix of the adapter's own tools dropped), else ``rawInput.todos`` -> ``todowrite`` /
``rawInput.subagent_type`` -> ``task``, else the title first seen (when the agent's titles are tool
names, :class:`ToolStyle`), else a stable name for the ACP kind (the style's table), else the kind.

``output``: the terminal's output when the content shows a terminal the session can look up, else
``rawOutput`` (its text when it is text, text blocks or a dict with one of the style's text fields,
such as codex's ``formatted_output``; JSON text otherwise), else the text of the content.

A ``session/request_permission`` carries the tool call too (:meth:`ToolCalls.permission_tool_call`):
its input, title and kind fill what the call lacks, and its diffs are kept. For each file the fullest
diff seen wins: opencode shows whole-file diffs only in the permission request, and a shorter,
misnumbered one in its later update. ``file_ref`` parts: diffs (v1 and v2, see :mod:`.diffs`), resource
links in the content, the locations of read tools (action read), and the file an edit tool names in
its input when no diff shows it (with the diff of a write the agent made through the bridge).

A v1 diff is made from whole files (it must apply to the file as it was): the agent's exact record of
the change (claude's ``toolResponse``, qwen-code's ``rawOutput``; ``exact``), or a whole file the agent
wrote through the bridge (``file_written``), else the file as read by the session layer
(``files_wanted``, then ``supply_files``; ``views``), else the texts for agents whose diffs are whole
files; else none. File text held for open calls is bounded (``FILE_TEXT_BUDGET``).

Native ids: the call item's is the toolCallId (or ``_meta["sandbox-agent/nativeItemId"]``), the result
item's ``<toolCallId>:result`` (or ``_meta["sandbox-agent/resultNativeItemId"]``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.events.model import EventDraft, item_raw, kept_raw

from . import diffs
from .content import block_to_part, meta_str
from .handler import ItemTranslator
from .items import make_item

TOOL_STATUSES = frozenset({"pending", "in_progress", "completed", "failed", "cancelled"})
# At most this many files are read for one update (an agent may name any number in its diffs), and
# at most this many bytes of file text are held for the open tool calls of a session.
FILES_PER_UPDATE = 8
FILE_TEXT_BUDGET = 64 * 1024 * 1024
ENDED = frozenset({"completed", "failed", "cancelled"})
_MISSING: Any = object()
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass(frozen=True, slots=True)
class ToolStyle:
    """How one kind of agent names its tools and where their output text is (from its profile)."""

    names: dict[str, str] = field(default_factory=dict)  # ACP kind -> stable tool name
    title_names: bool = True  # the first title is the tool's name
    output_fields: tuple[str, ...] = ("output",)
    # Dotted paths in `rawOutput` to a unified diff the agent made itself (whole-file numbering).
    patch_fields: tuple[str, ...] = ()
    # Agent tool names (ACP `name`, vendor names) -> the stable name shown for them.
    aliases: dict[str, str] = field(default_factory=dict)
    # Agent tool names that run anything (codex's `exec_command` runs `cat` as well as `echo`):
    # the ACP kind names such a call (read, shell...), the alias only when there is no kind.
    kind_named: frozenset[str] = frozenset()
    # The agent's v1 diffs are whole files (ACP's meaning): without the file, they are shown as
    # they are. False for agents that send snippets (claude): then only exact data gives a diff.
    whole_file_diffs: bool = True
    # A `rawOutput` object without any of `output_fields` is shown as JSON text (else the text content).
    json_output: bool = True


DEFAULT_STYLE = ToolStyle()
VENDOR_PREFIXES = ("mcp__acp__",)


def vendor_tool_name(meta: Any) -> str | None:
    """A tool name an agent put in ``_meta`` (``{"claudeCode": {"toolName": "Bash"}}``)."""
    if not isinstance(meta, dict):
        return None
    for key, value in meta.items():
        if key.startswith("sandbox-agent/") or not isinstance(value, dict):
            continue
        name = value.get("toolName")
        if isinstance(name, str) and name:
            for prefix in VENDOR_PREFIXES:
                if name.startswith(prefix) and len(name) > len(prefix):
                    return name[len(prefix) :]
            return name
    return None


@dataclass(slots=True)
class ToolCallState:
    call_id: str
    name: str
    first_title: str | None
    title: str | None = None
    kind: str | None = None
    status: str = "pending"
    raw_input: Any = _MISSING
    raw_output: Any = None
    content: list[Any] = field(default_factory=list)
    locations: list[Any] = field(default_factory=list)
    explicit_name: str | None = None
    call_item_id: str = ""
    call_native: str = ""
    result_item_id: str | None = None
    result_native: str = ""
    parent_id: str | None = None
    call_done: bool = False
    result_started: bool = False
    chunked: bool = False
    vendor_name: str | None = None
    # Diffs from the permission request, by path (kept when the agent's own are shorter).
    asked_diffs: dict[str, dict[str, Any]] = field(default_factory=dict)
    raws: list[Any] = field(default_factory=list)
    # Output text the agent streamed in `_meta` (`terminal_output_delta`, `terminal_output`) for a
    # terminal of its own, which the bridge cannot look up.
    streamed: list[str] = field(default_factory=list)
    # The agent's own exact record of a change, by path (claude's toolResponse): whole files.
    exact: dict[str, diffs.WholeFiles] = field(default_factory=dict)
    # The files the call's diffs name, as the session layer read them (None: no such file), and
    # whether the change was made then (the call had completed).
    views: dict[str, tuple[str | None, bool]] = field(default_factory=dict)
    written: int = 0  # bytes of the changes the agent wrote through the bridge, held in `exact`
    _diff_cache: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    def raw(self) -> Any:
        """The call's ACP messages: one message as itself, several as a list."""
        return item_raw(self.raws)

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def has_output(self) -> bool:
        return self.raw_output is not None or self.chunked or bool(self.streamed)


def detect_name(state: ToolCallState, style: ToolStyle = DEFAULT_STYLE) -> str:
    for name in (state.explicit_name, state.vendor_name):
        if not name:
            continue
        if name in style.kind_named and state.kind:
            return style.names.get(state.kind, state.kind)
        return style.aliases.get(name, name)
    raw_input = state.raw_input
    if isinstance(raw_input, dict):
        if isinstance(raw_input.get("todos"), list):
            return "todowrite"
        if raw_input.get("subagent_type") or raw_input.get("subagentType"):
            return "task"
    if state.first_title and style.title_names:
        return state.first_title
    if state.kind:
        return style.names.get(state.kind, state.kind)
    if state.first_title:
        return state.first_title
    return "tool"


def _diff_size(item: dict[str, Any]) -> int:
    old, new = item.get("oldText"), item.get("newText")
    return (len(old) if isinstance(old, str) else 0) + (len(new) if isinstance(new, str) else 0)


class Translator(ItemTranslator, Protocol):
    """What tool calls use of the session's ``SessionTranslator`` (which imports this module)."""

    @property
    def tool_style(self) -> ToolStyle: ...
    @property
    def terminal_output(self) -> Callable[[str], str | None] | None: ...


class ToolCalls:
    """The tool calls of one session."""

    def __init__(self, translator: Translator) -> None:
        self._t = translator
        self.calls: dict[str, ToolCallState] = {}
        self.finished: dict[str, tuple[str, str | None]] = {}  # toolCallId -> (call item, result item)
        # Tool calls first seen in a permission request, merged when the call is announced.
        self.asked: dict[str, dict[str, Any]] = {}
        # Files the session layer read for the update it translates next (``supply_files``).
        self._supplied: dict[str, dict[str, str | None]] = {}
        self._held = 0  # bytes of file text held in the open calls' views and written changes

    @property
    def style(self) -> ToolStyle:
        return self._t.tool_style

    def permission_tool_call(self, tool_call: Any) -> None:
        """Keep what a permission request tells about its tool call (no event of its own)."""
        if not isinstance(tool_call, dict) or not isinstance(tool_call.get("toolCallId"), str):
            return
        call_id = tool_call["toolCallId"]
        if call_id in self.finished:
            return
        state = self.calls.get(call_id)
        if state is None:
            self.asked[call_id] = tool_call
            while len(self.asked) > 256:
                self.asked.pop(next(iter(self.asked)))
            return
        self._merge_asked(state, tool_call)

    @staticmethod
    def _merge_asked(state: ToolCallState, tool_call: dict[str, Any]) -> None:
        if state.raw_input is _MISSING and tool_call.get("rawInput") is not None:
            state.raw_input = tool_call["rawInput"]
        if state.kind is None and isinstance(tool_call.get("kind"), str):
            state.kind = tool_call["kind"]
        if state.vendor_name is None:
            state.vendor_name = vendor_tool_name(tool_call.get("_meta"))
        for item in tool_call.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "diff" and isinstance(item.get("path"), str):
                known = state.asked_diffs.get(item["path"])
                if known is None or _diff_size(item) > _diff_size(known):
                    state.asked_diffs[item["path"]] = item

    # ---- the files behind diffs ----------------------------------------------------------------
    def files_wanted(self, update: dict[str, Any]) -> list[str]:
        """The files whose text the translation of ``update`` (a tool_call or tool_call_update) needs
        to show exact diffs: those its v1 diffs name, when this update shows the call's result (it
        starts or ends it) and the agent gave no exact record of the change. The session layer reads
        them (no I/O here) and hands them over with ``supply_files`` before the update."""
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or call_id in self.finished:
            return []
        state = self.calls.get(call_id)
        status = update.get("status")
        if status not in TOOL_STATUSES or (status == "pending" and state is not None):
            status = state.status if state is not None else "pending"
        meta = update.get("_meta")
        streamed = isinstance(meta, dict) and any(key in meta for key in STREAMED_OUTPUT_KEYS)
        output = update.get("rawOutput") is not None or streamed or (state is not None and state.has_output)
        if status not in ENDED and (not output or (state is not None and state.result_started)):
            return []
        content = update.get("content")
        items = content if isinstance(content, list) else (state.content if state is not None else [])
        asked = state.asked_diffs.values() if state is not None else self._asked_diffs(call_id)
        exact = set(state.exact) if state is not None else set()
        change = diffs.vendor_change(meta) or diffs.output_change(update.get("rawOutput"))
        if change is not None:
            exact.add(change[0])
        wanted: list[str] = []
        for item in [*items, *asked]:
            if isinstance(item, dict) and item.get("type") == "diff" and not diffs.is_v2(item):
                path = item.get("path")
                if isinstance(path, str) and path and path not in exact and path not in wanted:
                    wanted.append(path)
        return wanted[:FILES_PER_UPDATE]

    def _asked_diffs(self, call_id: str) -> list[Any]:
        asked = self.asked.get(call_id)
        return list(asked.get("content") or []) if asked is not None else []

    def file_written(self, path: str, before: str | None, after: str) -> None:
        """A whole file the agent wrote through the bridge: the exact change of the one open tool
        call that names it (its diffs, edit target or locations); nothing when none or several do, or
        when it changed nothing. Several writes by one call make one change, from the first one's
        before to the last's after."""
        naming = [state for state in self.calls.values() if path in _paths_named(state)]
        if len(naming) != 1 or before == after:
            return  # no call, or which one cannot be told; or the file had changed already (opencode
            # writes a file itself, then through the client too): this write tells nothing
        state = naming[0]
        known = state.exact.get(path)
        first = known[0] if known is not None else before
        if not self._hold(len(first or "") + len(after) - (_size(known) if known is not None else 0)):
            return
        state.exact[path] = (first, after)
        state.written += len(first or "") + len(after) - (_size(known) if known is not None else 0)
        state._diff_cache.clear()

    def supply_files(self, call_id: str, files: dict[str, str | None]) -> None:
        """The text of files ``files_wanted`` named (None: no such file), for the next update of
        ``call_id``; a file that could not be read is left out. Only the last one is kept: it is
        for the update translated next."""
        self._supplied = {call_id: files}

    def _hold(self, size: int) -> bool:
        """Room for ``size`` more bytes of file text (taken when there is)."""
        if size > 0 and self._held + size > FILE_TEXT_BUDGET:
            return False
        self._held += size
        return True

    def _release(self, state: ToolCallState) -> None:
        self._held -= sum(len(view or "") for view, _ in state.views.values()) + state.written

    # ---- updates ---------------------------------------------------------------------------
    def upsert(self, update: dict[str, Any], raw: Any, *, chunk: Any = _MISSING) -> list[EventDraft]:
        call_id: str = update["toolCallId"]
        if call_id in self.finished:
            return []
        out = self._t.messages.close()
        state = self.calls.get(call_id)
        is_new = state is None
        if state is None:
            state = self._create(call_id, update)
        self._merge(state, update)
        if is_new and call_id in self.asked:
            self._merge_asked(state, self.asked.pop(call_id))
        files = self._supplied.pop(call_id, None)
        if files:
            changed = state.status == "completed"
            for path, view in files.items():
                known = state.views.get(path)
                if self._hold(len(view or "") - len((known[0] if known else None) or "")):
                    state.views[path] = (view, changed)
        if chunk is not _MISSING:
            state.content.append(chunk)
            state.chunked = True
        state.raws.append(kept_raw(raw))
        if not state.call_done:
            state.name = detect_name(state, self.style)
        if is_new:
            out.extend(self._t.lifecycle.started(self._call_item(state, "in_progress"), raw=raw))
        # Started events carry the message that started the item; completed ones every message of
        # the call so far, since any of them may have set what the item shows.
        if not state.call_done and (state.status != "pending" or state.has_output):
            out.extend(self._complete_call(state, state.raw()))
        if not state.result_started and (state.has_output or state.ended):
            out.extend(self._start_result(state, raw))
        if state.ended:
            out.extend(self._finish(state, state.raw(), "completed" if state.status == "completed" else "failed"))
        return out

    def _create(self, call_id: str, update: dict[str, Any]) -> ToolCallState:
        t = self._t
        title = update.get("title")
        state = ToolCallState(call_id=call_id, name="tool", first_title=title if isinstance(title, str) else None)
        state.call_native = meta_str(update, "nativeItemId") or call_id
        state.result_native = meta_str(update, "resultNativeItemId") or f"{call_id}:result"
        item_id = meta_str(update, "itemId")
        if item_id:
            t.ids.bind(state.call_native, item_id)
            state.call_item_id = item_id
        else:
            state.call_item_id = t.ids.for_native(state.call_native)
        parent = meta_str(update, "parentId")
        state.parent_id = t.ids.parent(parent) if parent else None
        self.calls[call_id] = state
        return state

    @staticmethod
    def _merge(state: ToolCallState, update: dict[str, Any]) -> None:
        title = update.get("title")
        if isinstance(title, str):
            state.title = title
            if not state.first_title:
                state.first_title = title
        kind = update.get("kind")
        if isinstance(kind, str):
            state.kind = kind
        status = update.get("status")
        if status in TOOL_STATUSES and not (status == "pending" and state.status != "pending"):
            state.status = status
        raw_input = update.get("rawInput")
        if raw_input is not None:
            state.raw_input = raw_input
        raw_output = update.get("rawOutput")
        if raw_output is not None:
            state.raw_output = raw_output
        content = update.get("content")
        if isinstance(content, list):
            state.content = content
        locations = update.get("locations")
        if isinstance(locations, list):
            state.locations = locations
        name = meta_str(update, "toolName")
        if name is None:
            acp_name = update.get("name")  # unstable ACP: the programmatic tool name
            name = acp_name if isinstance(acp_name, str) and acp_name else None
        if name is not None:
            state.explicit_name = name
        vendor = vendor_tool_name(update.get("_meta"))
        if vendor is not None:
            state.vendor_name = vendor
        meta = update.get("_meta")
        change = diffs.vendor_change(meta) or diffs.output_change(raw_output)
        if change is not None:
            state.exact[change[0]] = change[1]
        if isinstance(meta, dict):
            for key in STREAMED_OUTPUT_KEYS:
                chunk = meta.get(key)
                if isinstance(chunk, dict) and isinstance(chunk.get("data"), str):
                    state.streamed.append(chunk["data"])

    # ---- items -----------------------------------------------------------------------------
    def _call_item(self, state: ToolCallState, status: str) -> dict[str, Any]:
        arguments = "{}" if state.raw_input is _MISSING else _dumps(state.raw_input)
        part = {"type": "tool_call", "name": state.name, "arguments": arguments, "call_id": state.call_id}
        return make_item(
            item_id=state.call_item_id,
            native_item_id=state.call_native,
            kind="tool_call",
            role="assistant",
            content=[part],
            status=status,
            parent_id=state.parent_id,
        )

    def _result_item(self, state: ToolCallState, status: str) -> dict[str, Any]:
        assert state.result_item_id is not None
        return make_item(
            item_id=state.result_item_id,
            native_item_id=state.result_native,
            kind="tool_result",
            role="tool",
            content=self.result_parts(state),
            status=status,
            parent_id=state.call_item_id,
        )

    def _complete_call(self, state: ToolCallState, raw: Any) -> list[EventDraft]:
        state.call_done = True
        return self._t.lifecycle.completed(self._call_item(state, "completed"), raw=raw)

    def _start_result(self, state: ToolCallState, raw: Any) -> list[EventDraft]:
        state.result_started = True
        state.result_item_id = self._t.ids.for_native(state.result_native)
        return self._t.lifecycle.started(self._result_item(state, "in_progress"), raw=raw)

    def _finish(self, state: ToolCallState, raw: Any, status: str) -> list[EventDraft]:
        out = self._t.lifecycle.completed(self._result_item(state, status), raw=raw)
        self._release(state)
        del self.calls[state.call_id]
        self.finished[state.call_id] = (state.call_item_id, state.result_item_id)
        return out

    def flush(self) -> list[EventDraft]:
        """Complete every unfinished call as it stands (end of a turn)."""
        out: list[EventDraft] = []
        for state in list(self.calls.values()):
            raw = state.raw()
            if not state.call_done:
                out.extend(self._complete_call(state, raw))
            if not state.result_started:
                out.extend(self._start_result(state, raw))
            out.extend(self._finish(state, raw, "failed"))
        return out

    # ---- result content --------------------------------------------------------------------
    def result_parts(self, state: ToolCallState) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = [{"type": "tool_result", "call_id": state.call_id, "output": self.output(state)}]
        seen: set[str] = set()
        content = state.content
        if state.asked_diffs:
            content = self._with_asked_diffs(state)
        for item in content:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "diff":
                for part in self._diff_parts(state, item):
                    if part["type"] == "file_ref":
                        seen.add(part["path"])
                    parts.append(part)
            elif kind == "content":
                block = item.get("content")
                if isinstance(block, dict) and block.get("type") == "resource_link":
                    part = block_to_part(block)
                    if part["type"] == "file_ref" and part["path"] not in seen:
                        seen.add(part["path"])
                        parts.append(part)
        if state.kind == "read" or state.name.lower() in ("read", "read_file", "readfile"):
            for location in state.locations:
                path = location.get("path") if isinstance(location, dict) else None
                if isinstance(path, str) and path and path not in seen:
                    seen.add(path)
                    parts.append({"type": "file_ref", "path": path, "action": "read", "diff": None})
        elif state.kind == "edit" and not seen:
            edited = edit_target(state)
            if edited is not None:
                exact = state.exact.get(edited[0])
                if exact is not None:  # no diff content, but the change is known (written through the bridge)
                    parts.append(diffs.file_ref(edited[0], *exact))
                else:
                    parts.append({"type": "file_ref", "path": edited[0], "action": edited[1], "diff": None})
        return parts

    @staticmethod
    def _with_asked_diffs(state: ToolCallState) -> list[Any]:
        """The content with each file's fullest diff: the permission request's or the agent's own."""
        asked = dict(state.asked_diffs)
        content: list[Any] = []
        for item in state.content:
            if isinstance(item, dict) and item.get("type") == "diff" and item.get("path") in asked:
                other = asked.pop(item["path"])
                content.append(other if _diff_size(other) > _diff_size(item) else item)
            else:
                content.append(item)
        content.extend(asked.values())
        return content

    def _raw_patch(self, state: ToolCallState) -> str | None:
        for dotted in self.style.patch_fields:
            value: Any = state.raw_output
            for key in dotted.split("."):
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, str) and value:
                return value
        return None

    def _diff_parts(self, state: ToolCallState, item: dict[str, Any]) -> list[dict[str, Any]]:
        if diffs.is_v2(item):
            return diffs.v2_parts(item)
        path, old, new = diffs.v1_texts(item)
        exact = state.exact.get(path)
        if exact is not None:  # the agent's own record: whole files
            return [self._cached(state, ("exact", path), lambda: diffs.file_ref(path, *exact))]
        patch = self._raw_patch(state) if self.style.patch_fields else None
        if patch is not None and path:
            text = diffs.patch_for(path, patch)
            if text is not None:
                return [{"type": "file_ref", "path": path, "action": "patch" if old else "write", "diff": text}]
        view = state.views.get(path)
        if view is not None:  # the file as read: find the change in it
            key = ("view", path, old, new, view[1], view[0])
            files = diffs.located(old, new, view[0], view[1])
            if files is None:
                return [diffs.no_diff_ref(path, old)]
            return [self._cached(state, key, lambda: diffs.file_ref(path, *files))]
        if not self.style.whole_file_diffs and old:
            return [diffs.no_diff_ref(path, old)]  # snippets: no diff without the file
        # Started and completed show the same diff: computed once.
        return [self._cached(state, ("texts", path, old, new), lambda: diffs.v1_file_ref(item))]

    @staticmethod
    def _cached(state: ToolCallState, key: tuple[Any, ...], make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        part = state._diff_cache.get(key)
        if part is None:
            part = state._diff_cache[key] = make()
        return dict(part)

    def output(self, state: ToolCallState) -> str:
        lookup = self._t.terminal_output
        if lookup is not None and any(isinstance(i, dict) and i.get("type") == "terminal" for i in state.content):
            texts = content_texts(state.content, lookup)
            if texts is not None:
                return texts
        if state.streamed:
            return "".join(state.streamed)
        raw = state.raw_output
        if raw is not None and (self.style.json_output or not isinstance(raw, dict)):
            return output_text(raw, self.style.output_fields)
        if isinstance(raw, dict) and any(isinstance(raw.get(key), str) for key in self.style.output_fields):
            return output_text(raw, self.style.output_fields)
        return content_texts(state.content, None) or ""


def content_texts(content: list[Any], terminal_output: Callable[[str], str | None] | None) -> str | None:
    """The text of ``content`` items (terminals through ``terminal_output``); None when a terminal
    cannot be looked up."""
    texts: list[str] = []
    for item in content:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "content":
            block = item.get("content")
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                texts.append(block["text"])
        elif kind == "terminal" and terminal_output is not None:
            terminal_id = item.get("terminalId")
            text = terminal_output(terminal_id) if isinstance(terminal_id, str) else None
            if text is None:
                return None
            texts.append(text)
    return "\n".join(texts)


def output_text(raw_output: Any, fields: tuple[str, ...] = ("output",)) -> str:
    """``rawOutput`` as the legacy ``output`` string."""
    if isinstance(raw_output, str):
        return raw_output
    if isinstance(raw_output, dict):
        for key in fields:
            if isinstance(raw_output.get(key), str):
                return str(raw_output[key])
    if (
        isinstance(raw_output, list)
        and raw_output
        and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in raw_output)
    ):
        return "\n".join(b["text"] for b in raw_output)
    return _dumps(raw_output)


# `_meta` keys under which agents stream a command's output ({"data": text, "terminal_id": ...}):
# codex-acp 2.x always, 0.x when the client advertises `_meta.terminal_output`.
STREAMED_OUTPUT_KEYS = ("terminal_output_delta", "terminal_output")

_PATH_KEYS = ("file_path", "filePath", "filepath", "path")


def _size(files: diffs.WholeFiles) -> int:
    return len(files[0] or "") + len(files[1])


def _paths_named(state: ToolCallState) -> set[str]:
    """The files a tool call names: in its diffs, its edit target, its locations."""
    named = {
        item["path"]
        for item in [*state.content, *state.asked_diffs.values()]
        if isinstance(item, dict) and item.get("type") == "diff" and isinstance(item.get("path"), str)
    }
    named.update(loc["path"] for loc in state.locations if isinstance(loc, dict) and isinstance(loc.get("path"), str))
    target = edit_target(state)
    if target is not None:
        named.add(target[0])
    return named


def edit_target(state: ToolCallState) -> tuple[str, str] | None:
    """(path, action) of the file an edit tool names when no diff shows it: the path from rawInput,
    else the title when it looks like a path; ``write`` for whole-content input, else ``patch``."""
    raw_input = state.raw_input if isinstance(state.raw_input, dict) else {}
    path = next((raw_input[k] for k in _PATH_KEYS if isinstance(raw_input.get(k), str) and raw_input[k]), None)
    if path is None and state.title and "/" in state.title and " " not in state.title.strip():
        path = state.title.strip()
    if path is None:
        return None
    action = "write" if "content" in raw_input and not any(k in raw_input for k in EDIT_KEYS) else "patch"
    return path, action


EDIT_KEYS = ("old_string", "oldString", "new_string", "newString", "edits")
