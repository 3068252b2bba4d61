"""Human in the loop, pure parts: ACP permission and elicitation payloads <-> legacy event data.

- ``session/request_permission`` -> PermissionEventData (action, metadata, the legacy cache keys) and
  a legacy reply (``once``/``always``/``reject``) -> the ACP outcome, chosen by option *kind*.
- ``elicitation/create`` (form mode) and the ``_sandbox-agent/session/request_question`` extension ->
  QuestionEventData, and legacy answers (one list of strings per question) -> the form ``content``.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .content import meta_get
from .tools import vendor_tool_name

# Option kinds in order of preference for each legacy reply (ACP: choose by kind, never by id).
OPTION_PREFERENCE: dict[str, tuple[str, ...]] = {
    "once": ("allow_once", "allow_always"),
    "always": ("allow_always", "allow_once"),
    "reject": ("reject_once", "reject_always"),
}
REPLY_STATUS = {"once": "accept", "always": "accept_for_session", "reject": "reject"}
CANCELLED_OUTCOME: dict[str, Any] = {"outcome": "cancelled"}

# ACP tool kinds that change files: what `acceptEdits` approves without asking.
FILE_CHANGE_KINDS = frozenset({"edit", "delete", "move"})
PATH_KEYS = ("file_path", "path", "filepath", "filePath", "notebook_path", "abs_path")
_CATEGORY = re.compile(r"[A-Za-z0-9_.-]+")


def allocate_id(candidates: tuple[str, ...], used: set[str], prefix: str) -> str:
    """A request id unique in the session: the agent's native id when it has one (suffixed ``_2``,
    ``_3``... if it was used before), else ``<prefix>_<n>``."""
    base = candidates[0] if candidates else None
    for candidate in candidates:
        if candidate not in used:
            return candidate
    n = 2 if base else len(used) + 1
    while True:
        candidate = f"{base}_{n}" if base else f"{prefix}_{n}"
        if candidate not in used:
            return candidate
        n += 1


# ---- permissions -----------------------------------------------------------------------------------
def select_option(options: Any, reply: str) -> tuple[dict[str, Any], str]:
    """The ACP outcome for a legacy reply, and the legacy resolved status.

    Options are matched by ``kind``; ids mean nothing. With no option of a fitting kind the agent gets
    ``cancelled``, which denies the request, so the status is ``reject``.
    """
    by_kind: dict[str, str] = {}
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and isinstance(option.get("kind"), str) and "optionId" in option:
            by_kind.setdefault(option["kind"], option["optionId"])
    for kind in OPTION_PREFERENCE[reply]:
        if kind in by_kind:
            return {"outcome": "selected", "optionId": by_kind[kind]}, REPLY_STATUS[reply]
    return dict(CANCELLED_OUTCOME), "reject"


def category(key: str) -> str | None:
    """Legacy always-allow category of a cache key: its first word, cut at ``:``, lower-cased."""
    words = key.split()
    first = words[0].split(":", 1)[0] if words else ""
    return first.lower() if first and _CATEGORY.fullmatch(first) else None


def cache_keys(action: str, metadata: dict[str, Any]) -> frozenset[str]:
    """What an ``always`` grant remembers (legacy): the action, ``permission``, ``codexRequestKind``
    and the tool name, each with its category."""
    raw = [action, *(metadata.get(k) for k in ("permission", "codexRequestKind", "toolName", "tool_name"))]
    keys: set[str] = set()
    for key in raw:
        if isinstance(key, str) and key:
            keys.add(key)
            cat = category(key)
            if cat:
                keys.add(cat)
    return frozenset(keys)


def _normalised(value: Any) -> str:
    return value.lower().replace("_", "").replace("-", "") if isinstance(value, str) else ""


def is_file_change(action: str, kind: Any, metadata: dict[str, Any]) -> bool:
    return (
        kind in FILE_CHANGE_KINDS
        or _normalised(action) == "filechange"
        or _normalised(metadata.get("codexRequestKind")) == "filechange"
    )


class ToolCallMemory:
    """The latest known fields of recent tool calls, from ``tool_call``/``tool_call_update``.

    Some agents send a bare tool call in the permission request (no kind, no name) after announcing
    it in full; the remembered fields give the request a stable action.
    """

    LIMIT = 512

    def __init__(self) -> None:
        self._calls: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def update(self, update: Any) -> None:
        if not isinstance(update, dict) or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        known = self._calls.pop(call_id, {})
        for key in ("kind", "title", "name", "rawInput", "locations", "_meta"):
            if update.get(key) is not None:
                known[key] = update[key]
        self._calls[call_id] = known
        while len(self._calls) > self.LIMIT:
            self._calls.popitem(last=False)

    def get(self, call_id: Any) -> dict[str, Any]:
        return dict(self._calls.get(call_id, {})) if isinstance(call_id, str) else {}


@dataclass(slots=True, frozen=True)
class PermissionInfo:
    candidates: tuple[str, ...]  # native ids to use as permission_id, best first
    action: str
    metadata: dict[str, Any]
    options: list[Any]
    file_change: bool
    cache_keys: frozenset[str]


def _ext(params: dict[str, Any], tool_call: dict[str, Any], key: str) -> Any:
    """``_meta["sandbox-agent/<key>"]`` of the request, else of its tool call."""
    value = meta_get(params, key)
    return value if value is not None else meta_get(tool_call, key)


def _command(raw_input: dict[str, Any], params: dict[str, Any]) -> str | None:
    for key in ("command", "cmd"):
        value = raw_input.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    subject = params.get("subject")  # ACP v2 draft: {type:"command", command}
    if isinstance(subject, dict) and isinstance(subject.get("command"), str):
        return str(subject["command"])
    return None


def _path(raw_input: dict[str, Any], known: dict[str, Any]) -> str | None:
    for key in PATH_KEYS:
        if isinstance(raw_input.get(key), str):
            return str(raw_input[key])
    for location in known.get("locations") or []:
        if isinstance(location, dict) and isinstance(location.get("path"), str):
            return str(location["path"])
    for content in known.get("content") or []:
        if isinstance(content, dict) and content.get("type") == "diff" and isinstance(content.get("path"), str):
            return str(content["path"])
    return None


def legacy_metadata(
    style: str, action: str, tool_name: str | None, raw_input: dict[str, Any], command: str | None, path: str | None
) -> dict[str, Any]:
    """PermissionEventData ``metadata`` in the shape legacy gave for this kind of agent (behavior §7.1):
    ``claude`` ``{toolName, input, permissionSuggestions, blockedPath}``; ``codex`` ``{codexRequestKind,
    command?}``; otherwise what legacy clients read of a tool (``toolName``, ``command``, ``path``,
    ``input``), each when known. ACP's own fields (the tool call, the options) stay in the event's ``raw``."""
    if style == "claude":
        return {"toolName": tool_name or action, "input": raw_input, "permissionSuggestions": None, "blockedPath": None}
    if style == "codex":
        codex: dict[str, Any] = {"codexRequestKind": action}
        if command is not None:
            codex["command"] = command
        return codex
    found = {"toolName": tool_name, "command": command, "path": path, "input": raw_input or None}
    return {key: value for key, value in found.items() if value is not None}


def permission_info(
    params: Any,
    remembered: dict[str, Any] | None = None,
    kind_actions: dict[str, str] | None = None,
    metadata_style: str = "generic",
) -> PermissionInfo:
    """Legacy view of a ``session/request_permission`` request.

    ``action``: ``_meta["sandbox-agent/action"]``, else the tool's stable name (ACP ``name``, or a
    vendor ``_meta`` tool name), else its ``kind``, else ``other``. ``metadata``: exactly what the agent
    put in ``_meta["sandbox-agent/metadata"]``, else the legacy shape of ``metadata_style``
    (``legacy_metadata``).
    """
    params = params if isinstance(params, dict) else {}
    tool_call: dict[str, Any] = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    known = dict(remembered or {})
    known.update({k: v for k, v in tool_call.items() if v is not None})
    raw_input: dict[str, Any] = known["rawInput"] if isinstance(known.get("rawInput"), dict) else {}
    kind = known.get("kind") if isinstance(known.get("kind"), str) else None
    name = known.get("name") if isinstance(known.get("name"), str) and known.get("name") else None
    tool_name = (
        _ext(params, tool_call, "toolName")
        or vendor_tool_name(tool_call.get("_meta"))
        or vendor_tool_name((remembered or {}).get("_meta"))
        or name
    )
    action = _ext(params, tool_call, "action")
    if not isinstance(action, str) or not action:
        action = name or tool_name or (kind_actions or {}).get(kind or "other") or kind or "other"

    legacy = _ext(params, tool_call, "metadata")
    if isinstance(legacy, dict):
        metadata = dict(legacy)
    else:
        command = _command(raw_input, params)
        metadata = legacy_metadata(metadata_style, action, tool_name, raw_input, command, _path(raw_input, known))
    options = params.get("options") if isinstance(params.get("options"), list) else []

    candidates = [_ext(params, tool_call, "permissionId"), tool_call.get("toolCallId")]
    return PermissionInfo(
        candidates=tuple(c for c in candidates if isinstance(c, str) and c),
        action=action,
        metadata=metadata,
        options=options,
        file_change=is_file_change(action, kind, metadata),
        cache_keys=cache_keys(action, metadata),
    )


def permission_data(permission_id: str, action: str, status: str, metadata: Any) -> dict[str, Any]:
    """PermissionEventData, keys in the legacy order."""
    return {"permission_id": permission_id, "action": action, "status": status, "metadata": metadata}


# ---- questions -------------------------------------------------------------------------------------
ELICITATION_ACCEPT = "accept"
ELICITATION_DECLINE = "decline"
ELICITATION_CANCEL = "cancel"
TRUTHY = frozenset({"yes", "y", "true", "1", "on", "ok", "accept", "approve", "allow"})
_MISSING = object()


@dataclass(slots=True, frozen=True)
class QuestionInfo:
    candidates: tuple[str, ...]
    prompt: str
    options: list[str]
    schema: dict[str, Any] | None  # the elicitation's requestedSchema (None for the extension)


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def field_choices(prop: Any) -> list[tuple[str, Any]]:
    """(label, value) pairs a form field offers: ``enum`` (with legacy ``enumNames``), ``oneOf``/
    ``anyOf`` of ``{const, title}``, the same inside ``items`` for multi-select arrays, Yes/No for
    booleans. Free-text fields offer none."""
    if not isinstance(prop, dict):
        return []
    enum = prop.get("enum")
    if isinstance(enum, list):
        names = prop.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum) and all(isinstance(n, str) for n in names):
            return list(zip(names, enum, strict=True))
        return [(_label(v), v) for v in enum]
    for key in ("oneOf", "anyOf"):
        variants = prop.get(key)
        if isinstance(variants, list):
            pairs = [
                (v["title"] if isinstance(v.get("title"), str) else _label(v["const"]), v["const"])
                for v in variants
                if isinstance(v, dict) and "const" in v
            ]
            if pairs:
                return pairs
    if prop.get("type") == "array":
        return field_choices(prop.get("items"))
    if prop.get("type") == "boolean":
        return [("Yes", True), ("No", False)]
    return []


def schema_fields(schema: Any) -> list[tuple[str, dict[str, Any]]]:
    """The form's fields in schema order (one legacy question each)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    return [(name, prop if isinstance(prop, dict) else {}) for name, prop in props.items()]


def schema_options(schema: Any) -> list[str]:
    """Legacy ``options``: the labels of the form's first field."""
    fields = schema_fields(schema)
    return [label for label, _ in field_choices(fields[0][1])] if fields else []


def _pick(choices: list[tuple[str, Any]], text: str) -> Any:
    for label, value in choices:
        if text == label or (isinstance(value, str) and text == value):
            return value
    folded = text.strip().casefold()
    for label, value in choices:
        if folded == label.casefold() or folded == _label(value).casefold():
            return value
    return text  # free text ("other") goes through as written


def _number(text: str, integer: bool) -> Any:
    try:
        return int(text) if integer else float(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return _MISSING
        return int(value) if integer and value.is_integer() else (_MISSING if integer else value)


def field_value(prop: dict[str, Any], answer: list[str]) -> Any:
    """One field's value from one legacy answer (the selected option labels or free text)."""
    choices = field_choices(prop)
    kind = prop.get("type")
    if kind == "array":
        return [_pick(choices, text) for text in answer]
    if not answer:
        return _MISSING
    first = answer[0]
    if kind == "boolean":
        picked = _pick(choices, first)
        return picked if isinstance(picked, bool) else first.strip().lower() in TRUTHY
    if kind in ("number", "integer"):
        picked = _pick(choices, first)
        if isinstance(picked, int | float) and not isinstance(picked, bool):
            return picked
        return _number(first.strip(), kind == "integer")
    if choices:
        return _pick(choices, first)
    return ", ".join(answer) if len(answer) > 1 else first


def elicitation_content(schema: Any, answers: list[list[str]]) -> dict[str, Any]:
    """The form ``content`` for legacy answers: ``answers[i]`` fills the i-th field; a field left
    unanswered takes its schema ``default`` when it has one."""
    content: dict[str, Any] = {}
    fields = schema_fields(schema)
    for index, (name, prop) in enumerate(fields):
        value = field_value(prop, answers[index]) if index < len(answers) else _MISSING
        if value is _MISSING and "default" in prop:
            value = prop["default"]
        if value is not _MISSING:
            content[name] = value
    return content


def elicitation_question(params: Any) -> QuestionInfo:
    """Legacy view of a form-mode ``elicitation/create``."""
    params = params if isinstance(params, dict) else {}
    schema = params.get("requestedSchema") if isinstance(params.get("requestedSchema"), dict) else {}
    prompt = params.get("message")
    if not isinstance(prompt, str):
        fields = schema_fields(schema)
        first = fields[0][1] if fields else {}
        prompt = first.get("title") or first.get("description") or ""
    candidates = [meta_get(params, "questionId"), params.get("toolCallId")]
    return QuestionInfo(
        candidates=tuple(c for c in candidates if isinstance(c, str) and c),
        prompt=str(prompt),
        options=schema_options(schema),
        schema=schema,
    )


def _option_labels(options: Any) -> list[str]:
    labels = []
    for option in options if isinstance(options, list) else []:
        if isinstance(option, str):
            labels.append(option)
        elif isinstance(option, dict) and isinstance(option.get("label"), str):
            labels.append(option["label"])
    return labels


def extension_question(params: Any) -> QuestionInfo:
    """Legacy view of ``_sandbox-agent/session/request_question``: ``{prompt, options, questionId?}``
    (``question``/``question_id`` and the AskUserQuestion ``questions[0]`` shape are accepted too)."""
    params = params if isinstance(params, dict) else {}
    first: dict[str, Any] = {}
    questions = params.get("questions")
    if isinstance(questions, list) and questions and isinstance(questions[0], dict):
        first = questions[0]
    prompt = params.get("prompt", params.get("question", first.get("question", "")))
    options = params.get("options") if "options" in params else first.get("options")
    candidates = [params.get("questionId"), params.get("question_id"), meta_get(params, "questionId")]
    return QuestionInfo(
        candidates=tuple(c for c in candidates if isinstance(c, str) and c),
        prompt=prompt if isinstance(prompt, str) else _label(prompt),
        options=_option_labels(options),
        schema=None,
    )


def question_data(
    question_id: str, prompt: str, options: list[str], response: str | None, status: str
) -> dict[str, Any]:
    """QuestionEventData, exactly the legacy keys in the legacy order."""
    return {
        "question_id": question_id,
        "prompt": prompt,
        "options": list(options),
        "response": response,
        "status": status,
    }


def first_answer(answers: list[list[str]]) -> str | None:
    return answers[0][0] if answers and answers[0] else None
