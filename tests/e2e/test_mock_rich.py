"""The mock agent's legacy script (behavior §10) end to end: real bridge, real mock process, ACP between."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from app.agents.mock.commands import COMMANDS
from tests.support import create_session, events, iter_sse, send, wait_for_events

DONE = ("turn.ended", "session.ended")


def run(client: httpx.Client, session_id: str, message: str, **create: Any) -> list[dict[str, Any]]:
    """Create a mock session, send one message, return its events up to the end of the turn."""
    create_session(client, session_id, **create)
    send(client, session_id, message)
    return wait_for_events(client, session_id, lambda evs: evs[-1]["type"] in DONE and len(evs) > 2)


def turn(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events after the user's item (the script's part)."""
    start = next(i for i, e in enumerate(evs) if e["type"] == "item.completed" and e["data"]["item"]["role"] == "user")
    return evs[start + 1 :]


def shape(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in evs:
        item = e["data"].get("item")
        if item is not None:
            out.append((e["type"], item["kind"], item["native_item_id"], item["status"]))
        else:
            out.append((e["type"],))
    return out


def test_tool_command_gives_the_legacy_tool_items(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-tool", "tool"))
    assert shape(evs) == [
        ("item.started", "tool_call", "mock_1_tool_call", "in_progress"),
        ("item.completed", "tool_call", "mock_1_tool_call", "completed"),
        ("item.started", "tool_result", "mock_1_tool_result", "in_progress"),
        ("item.completed", "tool_result", "mock_1_tool_result", "failed"),
        ("turn.ended",),
    ]
    call, result = evs[1]["data"]["item"], evs[3]["data"]["item"]
    assert call["role"] == "assistant" and call["content"] == [
        {"type": "tool_call", "name": "mock.search", "arguments": '{"query":"example"}', "call_id": "mock_1_call"}
    ]
    assert result["role"] == "tool" and result["parent_id"] == call["item_id"]
    tool_result, read, write, patch = result["content"]
    assert tool_result == {"type": "tool_result", "call_id": "mock_1_call", "output": "mock search results"}
    assert read == {"type": "file_ref", "path": "mock_1/readme.md", "action": "read", "diff": None}
    assert (write["path"], write["action"]) == ("mock_1/output.txt", "write") and "+mock output\n" in write["diff"]
    assert (patch["path"], patch["action"]) == ("mock_1/patch.txt", "patch")
    assert patch["diff"].endswith("@@ -1 +1 @@\n-old\n+new\n")
    assert all(not e["synthetic"] for e in evs[:4])


def test_tool_events_carry_their_acp_messages(client: httpx.Client) -> None:
    run(client, "rich-tool-raw", "tool")
    evs = turn(events(client, "rich-tool-raw", include_raw="true"))
    raws = [e["raw"] for e in evs]
    assert raws[0]["method"] == "session/update" and raws[0]["params"]["update"]["sessionUpdate"] == "tool_call"
    # Completed items carry every message of the call so far; started ones the message that started them.
    assert [m["params"]["update"].get("status") for m in raws[1]] == ["pending", "in_progress"]
    assert "rawOutput" in raws[2]["params"]["update"]
    assert [m["params"]["update"].get("status") for m in raws[3]] == ["pending", "in_progress", None, "failed"]
    assert raws[4]["result"]["stopReason"] == "end_turn"
    first = events(client, "rich-tool-raw", include_raw="true")[:2]
    assert first[0]["raw"][0]["method"] == "session/new" and "sessionId" in first[0]["raw"][1]["result"]
    assert first[1]["raw"]["method"] == "session/prompt"


def test_status_command_and_status_prompt(client: httpx.Client) -> None:
    for sid, message in (("rich-status", "status"), ("rich-status-2", "Provide a short status update.")):
        evs = turn(run(client, sid, message))
        assert shape(evs) == [
            ("item.started", "status", "mock_1_status", "in_progress"),
            ("item.completed", "status", "mock_1_status", "completed"),
            ("turn.ended",),
        ]
        assert evs[0]["data"]["item"]["content"] == [{"type": "status", "label": "Indexing", "detail": "2 files"}]
        assert evs[1]["data"]["item"]["content"] == [{"type": "status", "label": "Indexing", "detail": "Done"}]
        assert evs[1]["data"]["item"]["role"] == "assistant"


def test_image_command(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-image", "image"))
    assert shape(evs) == [
        ("item.started", "message", "mock_1_image", "in_progress"),
        ("item.delta",),
        ("item.completed", "message", "mock_1_image", "completed"),
        ("turn.ended",),
    ]
    assert evs[2]["data"]["item"]["content"] == [
        {"type": "text", "text": "Here is a mock image output."},
        {"type": "image", "path": "mock_1/image.png", "mime": "image/png"},
    ]


def test_unknown_command(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-unknown", "unknown"))
    assert shape(evs) == [
        ("item.started", "unknown", "mock_1_unknown", "in_progress"),
        ("item.completed", "unknown", "mock_1_unknown", "completed"),
        ("turn.ended",),
    ]
    item = evs[1]["data"]["item"]
    assert item["role"] == "assistant" and item["content"] == [{"type": "text", "text": "Unknown item kind example."}]


def test_error_command_gives_error_then_unparsed(client: httpx.Client) -> None:
    run(client, "rich-error", "error")
    evs = turn(events(client, "rich-error", include_raw="true"))
    assert [e["type"] for e in evs] == ["error", "agent.unparsed", "turn.ended"]
    error, unparsed = evs[0], evs[1]
    assert error["synthetic"] is True and error["source"] == "daemon"
    assert error["data"] == {"message": "Mock error event.", "code": "mock_error", "details": {"mock": True}}
    assert error["raw"]["method"] == "_sandbox-agent/error"
    assert unparsed["synthetic"] is True
    assert unparsed["data"]["error"] == "unsupported payload" and unparsed["data"]["location"] == "mock.stream"
    assert unparsed["raw"]["params"]["update"]["raw"] == "mock"


def test_unparsed_command(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-unparsed", "unparsed"))
    assert [e["type"] for e in evs] == ["agent.unparsed", "turn.ended"]
    assert evs[0]["data"]["raw_hash"].startswith("sha256:")


def test_end_command_ends_without_turn_ended_and_the_session_goes_on(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-end", "end"))
    assert [e["type"] for e in evs] == ["session.ended"]
    assert evs[0]["data"] == {"reason": "completed", "terminated_by": "agent"} and evs[0]["synthetic"] is True
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "rich-end")
    assert info["ended"] is False  # legacy: the mock's end does not mark the session ended
    last = evs[0]["sequence"]
    send(client, "rich-end", "echo still here")
    later = wait_for_events(client, "rich-end", lambda e: e[-1]["type"] == "turn.ended", offset=last)
    assert later[-2]["data"]["item"]["content"] == [{"type": "text", "text": "still here"}]


def test_rich_assistant_has_text_reasoning_and_json(client: httpx.Client) -> None:
    """Legacy §10.2: started whole, two native deltas, completed whole; no synthetic delta."""
    evs = turn(run(client, "rich-rich", "Answer briefly and include your reasoning."))
    assert [e["type"] for e in evs] == ["item.started", "item.delta", "item.delta", "item.completed", "turn.ended"]
    assert [e["data"]["delta"] for e in evs[1:3]] == ["Mock assistant ", "streaming delta."]
    assert [e["synthetic"] for e in evs[:4]] == [False, False, False, False]
    content = [
        {"type": "text", "text": "Mock assistant response with rich content."},
        {"type": "reasoning", "text": "Public reasoning for display.", "visibility": "public"},
        {"type": "reasoning", "text": "Private reasoning hidden by default.", "visibility": "private"},
        {"type": "json", "json": {"stage": "analysis", "ok": True}},
    ]
    for event in (evs[0], evs[3]):
        item = event["data"]["item"]
        assert item["native_item_id"] == "mock_1_assistant_rich" and item["role"] == "assistant"
        assert item["content"] == content


def test_single_text_replies_get_the_synthetic_delta(client: httpx.Client) -> None:
    """Legacy §10.1 example: started with the text, a synthetic (daemon) delta, completed."""
    evs = turn(run(client, "rich-ok", "Reply with exactly the single word OK."))
    assert [(e["type"], e["source"]) for e in evs] == [
        ("item.started", "agent"),
        ("item.delta", "daemon"),
        ("item.completed", "agent"),
        ("turn.ended", "daemon"),
    ]
    assert evs[0]["data"]["item"]["content"] == [{"type": "text", "text": "OK"}]
    assert evs[1]["data"]["delta"] == "OK"


def test_markdown_and_image_as_legacy(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-md", "markdown"))
    assert [e["type"] for e in evs] == ["item.started", *["item.delta"] * 8, "item.completed", "turn.ended"]
    assert evs[0]["data"]["item"]["content"] == [{"type": "text", "text": "Markdown demo (streaming follows)..."}]
    document = "".join(e["data"]["delta"] for e in evs[1:9])
    assert document.startswith("# Markdown Demo\n") and document.endswith("End of markdown demo.")
    assert evs[9]["data"]["item"]["content"] == [{"type": "text", "text": document}]
    image = turn(run(client, "rich-img", "image"))
    assert [e["type"] for e in image] == ["item.started", "item.delta", "item.completed", "turn.ended"]
    assert [p["type"] for p in image[0]["data"]["item"]["content"]] == ["text", "image"]
    assert image[1]["synthetic"] is True


def test_demo_runs_every_part_in_legacy_order(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-demo", "demo"))
    done = [e["data"]["item"] for e in evs if e["type"] == "item.completed"]
    markers = [i for i in done if (i["native_item_id"] or "").startswith("mock_1_marker_")]
    assert [m["native_item_id"] for m in markers] == [f"mock_1_marker_{k}" for k in range(1, 11)]
    assert markers[0]["content"] == [{"type": "text", "text": "Next: system message (system role)."}]
    parts = [(i["kind"], i["native_item_id"]) for i in done if i not in markers]
    assert parts == [
        ("system", "mock_1_system"),
        ("message", "mock_1_assistant_rich"),
        ("status", "mock_1_status"),
        ("message", "mock_1_markdown"),
        ("tool_call", "mock_1_tool_call"),
        ("tool_result", "mock_1_tool_result"),
        ("message", "mock_1_image"),
        ("unknown", "mock_1_unknown"),
    ]
    assert done[1]["role"] == "system"
    types = [e["type"] for e in evs]
    assert types[-3:] == ["error", "agent.unparsed", "turn.ended"]
    if "permission" in COMMANDS:
        assert types.count("permission.requested") == 2
    if "question" in COMMANDS:
        assert types.count("question.requested") == 2
    # Items complete in the order they start: each marker is done before its part begins.
    order = [e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.started"]
    assert order == [e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.completed"]
    # Marker 8 and 9 are complete before their requests (legacy: each marker is a whole message).
    for marker, request in (("mock_1_marker_8", "permission.requested"), ("mock_1_marker_9", "question.requested")):
        if request not in types:
            continue
        marker_done = next(
            i
            for i, e in enumerate(evs)
            if e["type"] == "item.completed" and e["data"]["item"]["native_item_id"] == marker
        )
        assert marker_done < types.index(request)


def test_plan_command_gives_status_items(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-plan", "plan"))
    plans = [e["data"]["item"] for e in evs if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "status"]
    assert [p["content"][0] for p in plans] == [
        {"type": "status", "label": "plan", "detail": "0/3 completed"},
        {"type": "status", "label": "plan", "detail": "1/3 completed"},
    ]
    assert [e["status"] for e in plans[1]["content"][1]["json"]["entries"]] == ["completed", "in_progress", "pending"]


def test_diff_command_v2_structured_diff(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-diff", "diff"))
    result = next(
        e["data"]["item"] for e in evs if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "tool_result"
    )
    refs = [(p["path"], p["action"], p["diff"] is not None) for p in result["content"] if p["type"] == "file_ref"]
    assert refs == [
        ("mock_1/added.txt", "write", True),
        ("mock_1/patch.txt", "patch", True),
        ("mock_1/new_name.txt", "patch", True),
        ("mock_1/gone.txt", "patch", True),
        ("mock_1/logo.png", "patch", False),
    ]
    assert [c["operation"] for c in result["content"][-1]["json"]["changes"]] == [
        "add",
        "modify",
        "move",
        "delete",
        "modify",
    ]


def test_v2_command_upserts_and_content_chunks(client: httpx.Client) -> None:
    evs = turn(run(client, "rich-v2", "v2"))
    done = {e["data"]["item"]["native_item_id"]: e["data"]["item"] for e in evs if e["type"] == "item.completed"}
    assert done["mock_1_v2_answer"]["content"] == [{"type": "text", "text": "Final v2 answer."}]
    assert done["mock_1_v2_thought"]["content"][0]["type"] == "reasoning"
    assert done["mock_1_v2_call:result"]["content"][0]["output"] == "v2\n"
    assert not [e for e in evs if e["type"] == "agent.unparsed"]


def test_outgoing_meta_reaches_the_agent(client: httpx.Client) -> None:
    evs = run(
        client,
        "rich-meta",
        "meta",
        agentMode="plan",
        title="Bridge title",
        variant="fast",
        agentVersion="1.2.3",
        mcp={"fs": {"type": "local", "command": ["mcp-fs", "--ro"], "timeoutMs": 500}},
    )
    reply = next(
        e for e in evs if e["type"] == "item.completed" and e["data"]["item"]["native_item_id"] == "mock_1_meta"
    )
    received = json.loads(reply["data"]["item"]["content"][0]["text"])
    assert received["sessionNew"] == {
        "sandbox-agent/sessionId": "rich-meta",
        "sandbox-agent/agent": "mock",
        "sandbox-agent/agentMode": "plan",
        "sandbox-agent/permissionMode": "default",
        "sandbox-agent/model": "mock",
        "sandbox-agent/variant": "fast",
        "sandbox-agent/agentVersion": "1.2.3",
        "sandbox-agent/title": "Bridge title",
        "sandbox-agent/mcp": {"fs": {"type": "local", "command": ["mcp-fs", "--ro"], "args": [], "timeoutMs": 500}},
    }
    assert received["prompt"] == {"sandbox-agent/turnId": "turn_1"}


def test_session_info_follows_the_agent(client: httpx.Client) -> None:
    create_session(client, "rich-info", title="Before")
    send(client, "rich-info", "title After the summary")
    send(client, "rich-info", "mode plan")
    wait_for_events(client, "rich-info", lambda evs: sum(e["type"] == "turn.ended" for e in evs) == 2)
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "rich-info")
    assert info["title"] == "After the summary" and info["agentMode"] == "plan"
    assert info["updatedAt"] >= 1769768142000


def test_session_info_echoes_mcp_and_skills(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "my-test-skill").mkdir()
    (tmp_path / "my-test-skill" / "SKILL.md").write_text("---\nname: my-test-skill\n---\n")
    skills = {"sources": [{"type": "local", "source": str(tmp_path)}]}
    mcp = {"remote": {"type": "remote", "url": "https://mcp.example/api", "transport": "sse"}}
    create_session(client, "rich-echo", skills=skills, mcp=mcp)
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "rich-echo")
    assert info["skills"]["sources"][0]["source"] == str(tmp_path)
    assert info["mcp"]["remote"]["url"] == "https://mcp.example/api"


def test_messages_stream_with_include_raw(client: httpx.Client) -> None:
    create_session(client, "rich-stream")
    with client.stream(
        "POST", "/v1/sessions/rich-stream/messages/stream", params={"includeRaw": "true"}, json={"message": "tool"}
    ) as response:
        assert response.status_code == 200
        got = list(iter_sse(response))
    assert got[-1]["type"] == "turn.ended" and got[-1]["raw"]["result"]["stopReason"] == "end_turn"
    tool_events = [e for e in got if e["type"].startswith("item.") and e["data"]["item"]["kind"].startswith("tool")]
    assert len(tool_events) == 4 and all(e["raw"] is not None for e in tool_events)


def test_attachments_reach_the_mock_as_legacy_text(client: httpx.Client) -> None:
    """Legacy §3.8: the mock saw `message + "\\n\\nAttachments:\\n- <path>\\n"...`, in its user item too."""
    create_session(client, "rich-attach")
    # Paths as given: absolute, relative (legacy did not make it absolute), a file URL.
    attachments = [
        {"path": "/tmp/shot.png", "mime": "image/png"},
        {"path": "docs/notes.txt"},
        {"path": "file:///srv/notes.txt"},
    ]
    send(client, "rich-attach", "hello", attachments=attachments)
    evs = wait_for_events(client, "rich-attach", lambda e: e[-1]["type"] in DONE and len(e) > 2)
    combined = "hello\n\nAttachments:\n- /tmp/shot.png\n- docs/notes.txt\n- file:///srv/notes.txt"
    done = [e["data"]["item"] for e in evs if e["type"] == "item.completed"]
    assert [(i["native_item_id"], i["content"]) for i in done] == [
        ("mock_1_user", [{"type": "text", "text": combined}]),
        ("mock_1_reply", [{"type": "text", "text": combined}]),
    ]
