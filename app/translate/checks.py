"""Cheap shape checks of ACP ``session/update`` payloads.

A payload that lacks what its variant requires (or has it with the wrong JSON type) is reported as
``agent.unparsed`` instead of being translated. Optional fields are lenient, as ACP's reference
implementations are: a bad optional value is ignored and bad array items are skipped.

Hand checks, not the SDK's pydantic models: validating one text chunk with the SDK model takes
longer (about 4-5 µs) than checking and translating it by hand (about 2.5-3.5 µs; see
``bench/translate_bench.py``), and the models drop the unknown fields and variants the bridge keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[dict[str, Any]], str | None]

# Required fields of ContentBlock variants; unknown block types are kept as they are (v2 lets
# unions grow), so they are not errors.
_BLOCK_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "text": (("text", str),),
    "image": (("data", str), ("mimeType", str)),
    "audio": (("data", str), ("mimeType", str)),
    "resource_link": (("uri", str), ("name", str)),
    "resource": (("resource", dict),),
}


def block_problem(block: Any, where: str = "content") -> str | None:
    if type(block) is not dict:
        return f"{where} is not a ContentBlock object"
    kind = block.get("type")
    if type(kind) is not str:
        return f"{where}.type is missing"
    required = _BLOCK_REQUIRED.get(kind)
    if required:
        for key, expected in required:
            if type(block.get(key)) is not expected:
                return f"{where} ({kind}) needs {key} as {expected.__name__}"
    return None


def _needs(update: dict[str, Any], *fields: tuple[str, type | tuple[type, ...]]) -> str | None:
    for key, expected in fields:
        value = update.get(key)
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is int):
            name = expected.__name__ if isinstance(expected, type) else "/".join(t.__name__ for t in expected)
            return f"missing or invalid {key} (expected {name})"
        if expected is str and not value:
            return f"empty {key}"
    return None


def _tool_call(update: dict[str, Any]) -> str | None:
    return _needs(update, ("toolCallId", str), ("title", str))


def _tool_call_update(update: dict[str, Any]) -> str | None:
    return _needs(update, ("toolCallId", str))


def _tool_call_content_chunk(update: dict[str, Any]) -> str | None:
    problem = _needs(update, ("toolCallId", str), ("content", dict))
    if problem is None and type(update["content"].get("type")) is not str:
        return "content.type is missing"
    return problem


def _plan(update: dict[str, Any]) -> str | None:
    return _needs(update, ("entries", list))


def _plan_update(update: dict[str, Any]) -> str | None:
    problem = _needs(update, ("plan", dict))
    if problem is None:
        plan = update["plan"]
        if type(plan.get("type")) is not str:
            return "plan.type is missing"
        if plan["type"] == "items" and type(plan.get("entries")) is not list:
            return "plan.entries is missing"
    return problem


def _message_upsert(update: dict[str, Any]) -> str | None:
    problem = _needs(update, ("messageId", str), ("content", list))
    if problem is None:
        for index, block in enumerate(update["content"]):
            problem = block_problem(block, f"content[{index}]")
            if problem is not None:
                return problem
    return problem


def _current_mode(update: dict[str, Any]) -> str | None:
    # The ACP docs' example spells it modeId; the schema and SDK say currentModeId. Take both.
    if isinstance(update.get("currentModeId"), str) or isinstance(update.get("modeId"), str):
        return None
    return "missing or invalid currentModeId (expected str)"


CHECKS: dict[str, Check] = {
    "tool_call": _tool_call,
    "tool_call_update": _tool_call_update,
    "tool_call_content_chunk": _tool_call_content_chunk,
    "plan": _plan,
    "plan_update": _plan_update,
    "plan_removed": lambda u: _needs(u, ("planId", str)),
    "available_commands_update": lambda u: _needs(u, ("availableCommands", list)),
    "current_mode_update": _current_mode,
    "config_option_update": lambda u: _needs(u, ("configOptions", list)),
    "usage_update": lambda u: _needs(u, ("used", int), ("size", int)),
    "user_message": _message_upsert,
    "agent_message": _message_upsert,
    "agent_thought": _message_upsert,
    "state_update": lambda u: _needs(u, ("state", str)),
    "notice": lambda u: _needs(u, ("title", str)),
    "compaction_summary_chunk": lambda u: block_problem(u.get("content")),
}


def update_problem(kind: str, update: dict[str, Any]) -> str | None:
    check = CHECKS.get(kind)
    return None if check is None else check(update)
