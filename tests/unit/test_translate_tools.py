"""tool_call / tool_call_update (and v2 content chunks) -> tool_call and tool_result items."""

from __future__ import annotations

import json
from typing import Any

from app.translate.session_translator import SessionTranslator
from app.translate.tools import output_text
from tests.unit.translate_support import end_turn, feed, items, text_chunk, types


def call(call_id: str = "c1", **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "bash", "kind": "execute", **fields}


def update(call_id: str = "c1", **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, **fields}


def kinds(drafts: list[Any]) -> list[tuple[str, str, str]]:
    return [(d.type, d.data["item"]["kind"], d.data["item"]["status"]) for d in drafts if "item" in d.data]


def test_a_call_from_pending_to_completed() -> None:
    t = SessionTranslator()
    out = feed(t, call(status="pending", rawInput={}))
    assert kinds(out) == [("item.started", "tool_call", "in_progress")]
    out = feed(t, update(status="in_progress", rawInput={"command": "ls"}))
    assert kinds(out) == [("item.completed", "tool_call", "completed")]
    part = out[0].data["item"]["content"][0]
    assert part == {"type": "tool_call", "name": "bash", "arguments": '{"command":"ls"}', "call_id": "c1"}
    out = feed(t, update(status="completed", rawOutput={"output": "a\nb\n"}))
    assert kinds(out) == [
        ("item.started", "tool_result", "in_progress"),
        ("item.completed", "tool_result", "completed"),
    ]
    result = out[1].data["item"]
    assert result["role"] == "tool" and result["native_item_id"] == "c1:result"
    assert result["parent_id"] == "itm_1" and result["item_id"] == "itm_2"
    assert result["content"] == [{"type": "tool_result", "call_id": "c1", "output": "a\nb\n"}]
    assert types(end_turn(t)) == ["turn.ended"]


def test_failed_and_cancelled_calls_give_failed_results() -> None:
    for status in ("failed", "cancelled"):
        t = SessionTranslator()
        out = feed(t, call(status="in_progress"), update(status=status))
        assert kinds(out)[-1] == ("item.completed", "tool_result", "failed")
        assert kinds(out)[1] == ("item.completed", "tool_call", "completed")


def test_output_arriving_starts_the_result_before_the_end() -> None:
    t = SessionTranslator()
    out = feed(t, call(status="pending"), update(rawOutput="partial"))
    assert kinds(out)[-2:] == [
        ("item.completed", "tool_call", "completed"),
        ("item.started", "tool_result", "in_progress"),
    ]
    out = feed(t, update(status="completed", rawOutput="all"))
    assert kinds(out) == [("item.completed", "tool_result", "completed")]
    assert out[0].data["item"]["content"][0]["output"] == "all"


def test_repeated_tool_call_for_one_id_is_an_update() -> None:
    # claude-code-acp announces a call twice: first empty, then with its input.
    t = SessionTranslator()
    out = feed(
        t,
        call(title="Write", kind="edit", status="pending", rawInput={}, content=[]),
        call(title="Write /w/a.txt", kind="edit", status="pending", rawInput={"file_path": "/w/a.txt"}),
        update(_meta={"claudeCode": {"toolName": "Write"}}),
        update(status="completed", rawOutput=[{"type": "text", "text": "ok"}]),
    )
    assert kinds(out) == [
        ("item.started", "tool_call", "in_progress"),
        ("item.completed", "tool_call", "completed"),
        ("item.started", "tool_result", "in_progress"),
        ("item.completed", "tool_result", "completed"),
    ]
    call_part = out[1].data["item"]["content"][0]
    assert call_part["name"] == "Write" and json.loads(call_part["arguments"]) == {"file_path": "/w/a.txt"}
    assert out[3].data["item"]["content"][0]["output"] == "ok"


def test_an_update_for_an_unknown_id_starts_the_call() -> None:
    # gemini: the first sight of a call may be its completed update.
    t = SessionTranslator()
    out = feed(t, update("g1", status="completed", title="Set 2 todo(s)", kind="other", content=[]))
    assert kinds(out) == [
        ("item.started", "tool_call", "in_progress"),
        ("item.completed", "tool_call", "completed"),
        ("item.started", "tool_result", "in_progress"),
        ("item.completed", "tool_result", "completed"),
    ]
    assert all(d.raw["params"]["update"]["toolCallId"] == "g1" for d in out)
    assert out[0].data["item"]["content"][0]["name"] == "Set 2 todo(s)"


def test_null_status_and_partial_updates_are_tolerated() -> None:
    t = SessionTranslator()
    out = feed(t, call(status="pending"), update(status=None, title=None, content=None, rawInput=None))
    assert kinds(out) == [("item.started", "tool_call", "in_progress")]
    out = feed(t, update(status="made_up_status"))
    assert out == []


def test_the_name_stays_when_the_title_changes() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        call(title="todowrite", kind="other", status="pending", rawInput={}),
        update(status="in_progress", title="todowrite", rawInput={"todos": [{"content": "x", "status": "pending"}]}),
        update(status="completed", title="2 todos"),
    )
    names = {d.data["item"]["content"][0]["name"] for d in out if d.data["item"]["kind"] == "tool_call"}
    assert names == {"todowrite"}


def test_names_from_raw_input_meta_and_kind() -> None:
    cases = [
        (call(title="Update TODOs", rawInput={"todos": []}, status="in_progress"), "todowrite"),
        (call(title="Explore", rawInput={"subagent_type": "Explore"}, status="in_progress"), "task"),
        (call(title="Explore", rawInput={"subagentType": "Plan"}, status="in_progress"), "task"),
        (update(kind="search", status="in_progress"), "search"),
        (update(status="in_progress"), "tool"),
        (call(title="Terminal", _meta={"sandbox-agent/toolName": "shell"}, status="in_progress"), "shell"),
        (call(title="Terminal", name="run_command", status="in_progress"), "run_command"),
    ]
    for first, name in cases:
        t = SessionTranslator()
        out = feed(t, first)
        assert out[1].data["item"]["content"][0]["name"] == name, first


def test_read_tools_show_their_locations_as_read_file_refs() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        call(title="read", kind="read", status="in_progress", locations=[{"path": "/w/a.txt", "line": 3}]),
        update(status="completed", rawOutput={"output": "<file>...</file>"}),
    )
    assert items(out)[-1]["content"][1:] == [{"type": "file_ref", "path": "/w/a.txt", "action": "read", "diff": None}]


def test_edit_tools_show_write_and_patch_diffs() -> None:
    t = SessionTranslator()
    content = [
        {"type": "content", "content": {"type": "text", "text": "Wrote file successfully."}},
        {"type": "diff", "path": "/w/new.ts", "oldText": "", "newText": "const a = 1;\n"},
        {
            "type": "diff",
            "path": "/w/old.ts",
            "oldText": "const x = 1;\n",
            "newText": "const x = 2;\n",
            "_meta": {"k": 1},
        },
    ]
    out = feed(t, call(title="edit", kind="edit", status="in_progress"), update(status="completed", content=content))
    parts = items(out)[-1]["content"]
    assert parts[0] == {"type": "tool_result", "call_id": "c1", "output": "Wrote file successfully."}
    assert parts[1]["action"] == "write" and parts[1]["diff"].startswith("--- /dev/null\n+++ b/w/new.ts\n@@ -0,0 +1 @@")
    assert parts[2]["action"] == "patch" and "-const x = 1;\n+const x = 2;\n" in parts[2]["diff"]


def test_an_edit_without_a_diff_names_its_file_from_the_input_or_title() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        call("w", title="write", kind="edit", status="in_progress", rawInput={"filePath": "/w/a", "content": "x"}),
        update("w", status="completed", title="/w/a"),
        call("e", title="edit", kind="edit", status="in_progress", rawInput={"file_path": "/w/b", "old_string": "a"}),
        update("e", status="completed"),
        call("t", title="edit", kind="edit", status="in_progress"),
        update("t", status="completed", title="src/c.py"),
    )
    refs = [i["content"][1:] for i in items(out) if i["kind"] == "tool_result"]
    assert refs == [
        [{"type": "file_ref", "path": "/w/a", "action": "write", "diff": None}],
        [{"type": "file_ref", "path": "/w/b", "action": "patch", "diff": None}],
        [{"type": "file_ref", "path": "src/c.py", "action": "patch", "diff": None}],
    ]


def test_v2_structured_diff_in_a_tool_result() -> None:
    t = SessionTranslator()
    diff = {
        "type": "diff",
        "changes": [{"operation": "add", "path": "/w/n.txt"}, {"operation": "delete", "path": "/w/g.txt"}],
        "patch": {
            "format": "git_patch",
            "text": "diff --git a/w/n.txt b/w/n.txt\n--- /dev/null\n+++ b/w/n.txt\n"
            "@@ -0,0 +1 @@\n+n\ndiff --git a/w/g.txt b/w/g.txt\n--- a/w/g.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n",
        },
    }
    out = feed(t, update(status="completed", kind="edit", content=[diff]))
    parts = items(out)[-1]["content"]
    assert [(p["type"], p.get("action")) for p in parts] == [
        ("tool_result", None),
        ("file_ref", "write"),
        ("file_ref", "patch"),
        ("json", None),
    ]
    assert parts[1]["diff"].startswith("diff --git a/w/n.txt") and "+++ /dev/null" in parts[2]["diff"]
    assert parts[3]["json"] == {"changes": diff["changes"]}


def test_terminal_output_comes_from_the_session_lookup() -> None:
    terminals = {"term-1": "fake-shell-ok\n"}
    t = SessionTranslator(terminal_output=terminals.get)
    out = feed(
        t,
        call(status="pending", rawInput={"command": "echo fake-shell-ok"}),
        update(status="in_progress", content=[{"type": "terminal", "terminalId": "term-1"}]),
        update(status="completed", rawOutput=[{"type": "text", "text": "Exited with code 0."}]),
    )
    assert items(out)[-1]["content"][0]["output"] == "fake-shell-ok\n"
    # Unknown terminal (or no lookup): rawOutput, then content text.
    unknown: dict[str, str] = {}
    t = SessionTranslator(terminal_output=unknown.get)
    out = feed(t, update(status="completed", content=[{"type": "terminal", "terminalId": "x"}], rawOutput="raw"))
    assert items(out)[-1]["content"][0]["output"] == "raw"
    t = SessionTranslator()
    t.terminal_output = terminals.get  # the lookup may also be given after construction
    out = feed(t, update(status="completed", content=[{"type": "terminal", "terminalId": "term-1"}]))
    assert items(out)[-1]["content"][0]["output"] == "fake-shell-ok\n"


def test_raw_output_shapes() -> None:
    assert output_text("plain") == "plain"
    assert output_text({"output": "o", "metadata": {}}) == "o"
    assert output_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert output_text({"exit": 0}) == '{"exit":0}'
    assert output_text(0) == "0"


def test_v2_content_chunks_append_and_start_the_result() -> None:
    t = SessionTranslator()
    chunk = {"type": "content", "content": {"type": "text", "text": "line 1"}}
    out = feed(
        t,
        update(status="in_progress", title="run"),
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": chunk},
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": chunk},
    )
    assert kinds(out)[-1] == ("item.started", "tool_result", "in_progress")
    out = feed(t, update(status="completed"))
    assert items(out)[-1]["content"][0]["output"] == "line 1\nline 1"


def test_unfinished_calls_complete_at_the_end_of_the_turn() -> None:
    t = SessionTranslator()
    feed(t, call("a", status="pending"), call("b", status="in_progress"), update("b", rawOutput="half"))
    out = end_turn(t)
    assert [
        (d.type, d.data.get("item", {}).get("native_item_id"), d.data.get("item", {}).get("status")) for d in out
    ] == [
        ("item.completed", "a", "completed"),
        ("item.started", "a:result", "in_progress"),
        ("item.completed", "a:result", "failed"),
        ("item.completed", "b:result", "failed"),
        ("turn.ended", None, None),
    ]
    assert out[3].data["item"]["content"][0]["output"] == "half"
    assert isinstance(out[0].raw, dict) and isinstance(out[3].raw, list)  # the call's own messages
    assert feed(t, update("a", status="completed")) == []  # a late update changes nothing


def test_meta_ids_and_parent_are_honoured() -> None:
    t = SessionTranslator()
    meta = {
        "sandbox-agent/nativeItemId": "mock_1_tool_call",
        "sandbox-agent/resultNativeItemId": "mock_1_tool_result",
        "sandbox-agent/parentId": "task-1",
    }
    out = feed(t, call("mock_1_call", status="in_progress", _meta=meta), update("mock_1_call", status="completed"))
    call_item, result = items(out)
    assert call_item["native_item_id"] == "mock_1_tool_call" and call_item["parent_id"] == "itm_2"
    assert result["native_item_id"] == "mock_1_tool_result" and result["parent_id"] == call_item["item_id"]
    t = SessionTranslator()
    out = feed(t, call(status="in_progress", _meta={"sandbox-agent/itemId": "itm_call"}))
    assert out[0].data["item"]["item_id"] == "itm_call"


def test_an_open_message_completes_before_the_call_starts() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("Let me look.", "m1"), call(status="pending"))
    assert [(d.type, d.data.get("item", {}).get("kind")) for d in out] == [
        ("item.started", "message"),
        ("item.delta", None),
        ("item.completed", "message"),
        ("item.started", "tool_call"),
    ]


def test_invalid_tool_updates_are_unparsed() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        {"sessionUpdate": "tool_call", "title": "x"},
        {"sessionUpdate": "tool_call", "toolCallId": "c"},
        {"sessionUpdate": "tool_call_update", "toolCallId": 7},
        {"sessionUpdate": "tool_call_update", "toolCallId": ""},
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c", "content": "x"},
    )
    assert types(out) == ["agent.unparsed"] * 5
    assert "toolCallId" in out[0].data["error"] and "title" in out[1].data["error"]
