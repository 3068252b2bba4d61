"""Pure HITL translation: option kinds, cache keys, ids, permission metadata, form schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.translate.hitl_shapes import (
    ToolCallMemory,
    allocate_id,
    cache_keys,
    category,
    elicitation_content,
    elicitation_question,
    extension_question,
    field_choices,
    permission_info,
    question_data,
    schema_options,
    select_option,
)
from tests.support import SHARED, SHARED_MISSING

ALL = [
    {"optionId": "x1", "kind": "reject_always"},
    {"optionId": "x2", "kind": "allow_always"},
    {"optionId": "x3", "kind": "reject_once"},
    {"optionId": "x4", "kind": "allow_once"},
]


@pytest.mark.parametrize(
    ("options", "reply", "outcome", "status"),
    [
        (ALL, "once", "x4", "accept"),
        (ALL, "always", "x2", "accept_for_session"),
        (ALL, "reject", "x3", "reject"),
        ([o for o in ALL if o["kind"] != "allow_once"], "once", "x2", "accept"),
        ([o for o in ALL if o["kind"] != "allow_always"], "always", "x4", "accept_for_session"),
        ([o for o in ALL if o["kind"] != "reject_once"], "reject", "x1", "reject"),
        ([o for o in ALL if o["kind"].startswith("allow")], "reject", None, "reject"),
        ([o for o in ALL if o["kind"].startswith("reject")], "once", None, "reject"),
        ([], "once", None, "reject"),
        ("not a list", "always", None, "reject"),
    ],
)
def test_select_option_by_kind(options: Any, reply: str, outcome: str | None, status: str) -> None:
    chosen, got_status = select_option(options, reply)
    expected = {"outcome": "cancelled"} if outcome is None else {"outcome": "selected", "optionId": outcome}
    assert chosen == expected
    assert got_status == status


def test_first_option_of_a_kind_wins_and_ids_are_opaque() -> None:
    options = [
        {"optionId": "allow_once", "kind": "reject_once"},
        {"optionId": "", "kind": "allow_once"},
        {"optionId": "later", "kind": "allow_once"},
        {"kind": "allow_once"},  # no id: skipped
    ]
    assert select_option(options, "once")[0] == {"outcome": "selected", "optionId": ""}
    assert select_option(options, "reject")[0] == {"outcome": "selected", "optionId": "allow_once"}


def test_cache_keys_and_categories() -> None:
    assert category("command_execution") == "command_execution"
    assert category("Bash: ls -la") == "bash"
    assert category("Bash(ls:*)") is None
    assert category("edit file.txt") == "edit"
    assert category("") is None
    keys = cache_keys("command_execution", {"codexRequestKind": "commandExecution", "command": "ls"})
    assert keys == {"command_execution", "commandExecution", "commandexecution"}
    keys = cache_keys("Bash", {"toolName": "Bash", "permission": "bash:*", "tool_name": None})
    assert keys == {"Bash", "bash", "bash:*"}
    file_keys = cache_keys("file_change", {"codexRequestKind": "fileChange"})
    assert not (keys & file_keys)


def test_allocate_id() -> None:
    used: set[str] = set()
    for expected in ("tc", "tc_2", "tc_3"):
        got = allocate_id(("tc",), used, "permission")
        assert got == expected
        used.add(got)
    assert allocate_id(("tc", "other"), used, "permission") == "other"
    assert allocate_id((), {"a", "b"}, "question") == "question_3"
    assert allocate_id((), {"a", "question_3"}, "question") == "question_4"


def test_permission_info_reads_the_request_and_the_remembered_tool_call() -> None:
    memory = ToolCallMemory()
    memory.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "kind": "execute",
            "title": "Terminal",
            "rawInput": {},
            "_meta": {"claudeCode": {"toolName": "Bash"}},
        }
    )
    memory.update({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": {"command": ["ls", "-l"]}})
    params = {
        "toolCall": {"toolCallId": "t1", "title": "`ls -l`"},
        "options": ALL,
    }
    info = permission_info(params, memory.get("t1"))
    assert info.action == "Bash"
    assert info.candidates == ("t1",)
    # What legacy clients read of a tool, nothing of ACP's (the tool call and options are in raw).
    assert info.metadata == {"toolName": "Bash", "command": "ls -l", "input": {"command": ["ls", "-l"]}}
    assert info.options == ALL
    assert not info.file_change
    assert info.cache_keys == {"Bash", "bash"}
    # In the shapes legacy gave for claude and codex.
    claude = permission_info(params, memory.get("t1"), metadata_style="claude")
    assert claude.metadata == {
        "toolName": "Bash",
        "input": {"command": ["ls", "-l"]},
        "permissionSuggestions": None,
        "blockedPath": None,
    }
    codex = permission_info(
        {"toolCall": {"toolCallId": "c1", "kind": "execute", "rawInput": {"command": ["ls"]}}},
        kind_actions={"execute": "commandExecution"},
        metadata_style="codex",
    )
    assert codex.action == "commandExecution"
    assert codex.metadata == {"codexRequestKind": "commandExecution", "command": "ls"}
    assert codex.cache_keys == {"commandExecution", "commandexecution"}


def test_permission_info_explicit_meta_and_file_changes() -> None:
    params = {
        "toolCall": {
            "toolCallId": "t2",
            "kind": "edit",
            "locations": [{"path": "/w/a.txt"}],
            "_meta": {"sandbox-agent/metadata": {"codexRequestKind": "fileChange"}},
        },
        "options": [],
        "_meta": {"sandbox-agent/action": "file_change", "sandbox-agent/permissionId": "p-9"},
    }
    info = permission_info(params)
    assert info.action == "file_change"
    assert info.candidates == ("p-9", "t2")
    assert info.metadata == {"codexRequestKind": "fileChange"}  # exactly what the agent gave
    assert info.file_change
    assert permission_info(
        {"toolCall": {"toolCallId": "t2", "kind": "edit", "locations": [{"path": "/w/a.txt"}]}}
    ).metadata == {"path": "/w/a.txt"}
    bare = permission_info({"toolCall": {"toolCallId": "t3", "name": "write_file"}})
    assert bare.action == "write_file"
    assert permission_info({}).action == "other"
    assert permission_info({"toolCall": {"toolCallId": "t4", "kind": "delete"}}).file_change
    assert permission_info({"_meta": {"sandbox-agent/action": "File-Change"}}).file_change


def test_tool_call_memory_is_bounded() -> None:
    memory = ToolCallMemory()
    for n in range(ToolCallMemory.LIMIT + 10):
        memory.update({"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "kind": "read"})
    assert memory.get("c0") == {}
    assert memory.get(f"c{ToolCallMemory.LIMIT + 9}") == {"kind": "read"}
    memory.update({"sessionUpdate": "plan", "toolCallId": "x"})
    assert memory.get("x") == {}


def test_field_choices() -> None:
    assert field_choices({"type": "string", "enum": ["a", "b"]}) == [("a", "a"), ("b", "b")]
    assert field_choices({"enum": ["a", "b"], "enumNames": ["A", "B"]}) == [("A", "a"), ("B", "b")]
    assert field_choices({"oneOf": [{"const": 1, "title": "One"}, {"const": 2}]}) == [("One", 1), ("2", 2)]
    assert field_choices({"type": "array", "items": {"enum": ["x"]}}) == [("x", "x")]
    assert field_choices({"type": "boolean"}) == [("Yes", True), ("No", False)]
    assert field_choices({"type": "string"}) == []
    assert schema_options({"properties": {"first": {"enum": ["Yes", "No"]}, "second": {"enum": ["z"]}}}) == [
        "Yes",
        "No",
    ]
    assert schema_options({}) == []


def test_elicitation_content() -> None:
    schema = {
        "type": "object",
        "properties": {
            "color": {"oneOf": [{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}]},
            "n": {"type": "number"},
            "ok": {"type": "boolean"},
            "many": {"type": "array", "items": {"enum": ["a", "b"]}},
            "free": {"type": "string"},
            "fallback": {"type": "integer", "default": 7},
            "unanswered": {"type": "string"},
        },
    }
    answers = [["blue"], ["2.5"], ["No"], ["b", "c"], ["one", "two"]]
    assert elicitation_content(schema, answers) == {
        "color": "blue",
        "n": 2.5,
        "ok": False,
        "many": ["b", "c"],
        "free": "one, two",
        "fallback": 7,
    }
    assert elicitation_content(schema, [["RED"], ["x"], ["true"]]) == {"color": "red", "ok": True, "fallback": 7}
    assert elicitation_content(schema, [["Purple"]]) == {"color": "Purple", "fallback": 7}
    assert elicitation_content({"properties": {"i": {"type": "integer"}}}, [["4.0"]]) == {"i": 4}
    assert elicitation_content({"properties": {"i": {"type": "integer"}}}, [["4.5"]]) == {}
    assert elicitation_content({}, [["x"]]) == {}


def test_question_views() -> None:
    params = {
        "message": "Pick",
        "mode": "form",
        "requestedSchema": {"properties": {"c": {"enum": ["x", "y"]}}},
        "toolCallId": "tc",
        "_meta": {"sandbox-agent/questionId": "q-1"},
    }
    info = elicitation_question(params)
    assert (info.candidates, info.prompt, info.options) == (("q-1", "tc"), "Pick", ["x", "y"])
    untitled = elicitation_question({"requestedSchema": {"properties": {"c": {"title": "Which?"}}}})
    assert untitled.prompt == "Which?" and untitled.options == [] and untitled.candidates == ()
    ext = extension_question({"question_id": "e", "question": "Go?", "options": ["a", {"label": "b"}, 3]})
    assert (ext.candidates, ext.prompt, ext.options, ext.schema) == (("e",), "Go?", ["a", "b"], None)
    legacy = extension_question({"questions": [{"question": "Q?", "options": [{"label": "L"}]}]})
    assert (legacy.prompt, legacy.options) == ("Q?", ["L"])
    assert list(question_data("q", "p", ["a"], None, "requested")) == [
        "question_id",
        "prompt",
        "options",
        "response",
        "status",
    ]


def test_real_agent_permission_requests_from_transcripts() -> None:
    """Permission requests recorded from real agents: a stable action, what legacy clients read, and
    the options each reply picks."""
    transcripts = SHARED / "acp" / "transcripts"
    if not transcripts.is_dir():
        pytest.skip(SHARED_MISSING)
    seen: dict[str, list[tuple[str, dict[str, Any], list[Any]]]] = {}
    for name in ("claude-code", "gemini", "opencode"):
        memory = ToolCallMemory()
        for line in (transcripts / f"{name}.jsonl").read_text().splitlines():
            message = json.loads(line)["msg"]
            if message.get("method") == "session/update":
                memory.update(message["params"]["update"])
            elif message.get("method") == "session/request_permission":
                params = message["params"]
                info = permission_info(params, memory.get(params["toolCall"]["toolCallId"]))
                assert info.candidates == (params["toolCall"]["toolCallId"],)
                picks = [select_option(params["options"], r)[0]["optionId"] for r in ("once", "always", "reject")]
                seen.setdefault(name, []).append((info.action, info.metadata, picks))
    claude = seen["claude-code"]
    assert [action for action, _, _ in claude] == ["Write", "Edit", "Bash"]
    assert claude[0][1]["path"].endswith("/ws/hello.txt") and "kind" not in claude[0][1]
    assert claude[2][1]["command"] == "echo fake-shell-ok" and claude[2][1]["toolName"] == "Bash"
    assert {tuple(p) for _, _, p in claude} == {("allow", "allow_always", "reject")}
    assert [action for action, _, _ in seen["opencode"]] == ["edit", "edit", "execute"]
    assert {tuple(p) for _, _, p in seen["opencode"]} == {("once", "always", "reject")}
    assert {tuple(p) for _, _, p in seen["gemini"]} == {("proceed_once", "proceed_always", "cancel")}
