"""Plans, notices, compaction, session state updates, unknown and malformed payloads, extensions."""

from __future__ import annotations

from typing import Any

import pytest

from app.translate import session_translator as translate_session
from app.translate.extensions import rpc_error_data
from app.translate.session_translator import MOCK_USER_ITEM, SessionTranslator, parse_time_ms, raw_hash
from tests.unit.translate_support import end_turn, feed, items, notification, text_chunk, types

ENTRIES = [
    {"content": "Write the file", "status": "completed", "priority": "medium"},
    {"content": "Run a command", "status": "in_progress", "priority": "high"},
]


def status_of(drafts: list[Any]) -> dict[str, Any]:
    done = items(drafts)
    assert len(done) == 1 and done[0]["kind"] == "status" and done[0]["role"] == "assistant"
    return done[0]


def test_plan_is_a_complete_status_item_per_update() -> None:
    t = SessionTranslator()
    out = feed(t, {"sessionUpdate": "plan", "entries": ENTRIES})
    assert types(out) == ["item.started", "item.completed"]
    assert all(d.raw["params"]["update"]["sessionUpdate"] == "plan" for d in out)
    item = status_of(out)
    assert item["content"] == [
        {"type": "status", "label": "plan", "detail": "1/2 completed"},
        {"type": "json", "json": {"planId": "main", "entries": ENTRIES}},
    ]
    second = feed(t, {"sessionUpdate": "plan", "entries": ENTRIES[:1]})
    assert status_of(second)["item_id"] != item["item_id"]
    assert t.state.plans["main"] == ENTRIES[:1]


def test_v2_plan_update_and_plan_removed() -> None:
    t = SessionTranslator()
    items_plan = {"type": "items", "planId": "p1", "entries": ENTRIES}
    item = status_of(feed(t, {"sessionUpdate": "plan_update", "plan": items_plan}))
    assert item["content"][1] == {"type": "json", "json": {"planId": "p1", "entries": ENTRIES}}
    markdown = {"type": "markdown", "planId": "p2", "content": "# Plan\n- a"}
    item = status_of(feed(t, {"sessionUpdate": "plan_update", "plan": markdown}))
    assert item["content"] == [
        {"type": "status", "label": "plan", "detail": "markdown"},
        {"type": "text", "text": "# Plan\n- a"},
        {"type": "json", "json": markdown},
    ]
    file_plan = {"type": "file", "planId": "p3", "uri": "file:///w/PLAN.md"}
    assert status_of(feed(t, {"sessionUpdate": "plan_update", "plan": file_plan}))["content"][-1]["json"] == file_plan
    item = status_of(feed(t, {"sessionUpdate": "plan_removed", "planId": "p1"}))
    assert item["content"] == [
        {"type": "status", "label": "plan", "detail": "removed"},
        {"type": "json", "json": {"planId": "p1", "removed": True}},
    ]
    assert "p1" not in t.state.plans and set(t.state.plans) == {"p2", "p3"}


def test_notice_and_compaction_are_status_items() -> None:
    t = SessionTranslator()
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited", "description": "Retrying"}
    item = status_of(feed(t, notice))
    assert item["content"][0] == {"type": "status", "label": "notice", "detail": "Rate limited"}
    assert item["content"][1]["json"] == {"severity": "warning", "title": "Rate limited", "description": "Retrying"}
    item = status_of(feed(t, {"sessionUpdate": "compaction_update", "status": "started"}))
    assert item["content"][0] == {"type": "status", "label": "compaction", "detail": "started"}


def test_a_status_item_completes_the_open_message_first() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("Planning.", "m"), {"sessionUpdate": "plan", "entries": []})
    assert [(d.type, d.data.get("item", {}).get("kind")) for d in out][2:] == [
        ("item.completed", "message"),
        ("item.started", "status"),
        ("item.completed", "status"),
    ]


def test_session_state_updates_make_no_events_and_are_kept() -> None:
    t = SessionTranslator()
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "session_info_update", "title": "Fix bug", "updatedAt": "2026-01-30T10:15:42Z"},
        {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {"id": "model", "category": "model", "currentValue": "fast"},
                {"id": "m", "category": "mode", "currentValue": "review"},
                "junk",
            ],
        },
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "init", "description": "d"}]},
        {"sessionUpdate": "usage_update", "used": 10, "size": 100000, "cost": {"amount": 0, "currency": "USD"}},
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
    ]
    assert feed(t, *updates) == []
    state = t.state
    assert state.title == "Fix bug" and state.title_set
    assert state.updated_at_ms == 1769768142000
    assert state.model == "fast" and state.agent_mode == "review" and state.mode == "review"
    assert state.available_commands == [{"name": "init", "description": "d"}]
    assert state.usage == {"used": 10, "size": 100000, "cost": {"amount": 0, "currency": "USD"}}
    assert state.agent_state == "idle"
    assert set(state.raw) == {u["sessionUpdate"] for u in updates}
    assert state.raw["usage_update"]["method"] == "session/update"


def test_session_info_patch_semantics() -> None:
    t = SessionTranslator()
    feed(t, {"sessionUpdate": "session_info_update", "title": "T"})
    feed(t, {"sessionUpdate": "session_info_update", "updatedAt": "2026-01-30T10:15:42.5+01:00"})
    assert t.state.title == "T" and t.state.updated_at_ms == 1769764542500
    feed(t, {"sessionUpdate": "session_info_update", "title": None, "_meta": {"x": 1}})
    assert t.state.title is None and t.state.title_set and t.state.info_meta == {"x": 1}


def test_mode_update_takes_the_docs_spelling_too() -> None:
    t = SessionTranslator()
    feed(t, {"sessionUpdate": "current_mode_update", "modeId": "architect"})
    assert t.state.agent_mode == "architect"


def test_parse_time() -> None:
    assert parse_time_ms("2026-01-30T10:15:42Z") == 1769768142000
    assert parse_time_ms("yesterday") is None and parse_time_ms(5) is None
    assert parse_time_ms("2026-01-30T10:15:42") is None  # no zone: unknown instant


def test_unknown_update_is_unparsed_and_the_session_goes_on() -> None:
    t = SessionTranslator()
    message = notification({"sessionUpdate": "brand_new_thing", "x": 1})
    out = t.session_update(message["params"], message)
    assert types(out) == ["agent.unparsed"]
    assert out[0].synthetic is True and out[0].raw is message
    assert out[0].data == {
        "error": "unknown sessionUpdate: brand_new_thing",
        "location": "session/update",
        "raw_hash": raw_hash(message),
    }
    assert types(feed(t, text_chunk("still here", "m"))) == ["item.started", "item.delta"]


@pytest.mark.parametrize(
    "params",
    [
        None,
        "text",
        {"sessionId": "s"},
        {"sessionId": "s", "update": []},
        {"sessionId": "s", "update": {"content": {}}},
        {"sessionId": "s", "update": {"sessionUpdate": 3}},
    ],
)
def test_malformed_notifications_are_unparsed(params: Any) -> None:
    out = SessionTranslator().session_update(params, {"params": params})
    assert types(out) == ["agent.unparsed"]


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "plan"},
        {"sessionUpdate": "plan", "entries": {}},
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p"}},
        {"sessionUpdate": "plan_update", "plan": {"planId": "p"}},
        {"sessionUpdate": "plan_removed"},
        {"sessionUpdate": "available_commands_update"},
        {"sessionUpdate": "current_mode_update"},
        {"sessionUpdate": "config_option_update", "configOptions": None},
        {"sessionUpdate": "usage_update", "used": 1},
        {"sessionUpdate": "usage_update", "used": True, "size": 2},
        {"sessionUpdate": "state_update"},
        {"sessionUpdate": "notice", "severity": "info"},
        {"sessionUpdate": "user_message", "messageId": "m", "content": [{"type": "text"}]},
        {"sessionUpdate": "compaction_summary_chunk", "content": None},
    ],
)
def test_payloads_missing_what_their_variant_requires_are_unparsed(update: dict[str, Any]) -> None:
    t = SessionTranslator()
    out = feed(t, update)
    assert types(out) == ["agent.unparsed"]
    assert out[0].data["error"].startswith(f"invalid {update['sessionUpdate']}: ")


def test_a_translation_failure_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(t: SessionTranslator, update: dict[str, Any], raw: Any) -> list[Any]:
        raise RuntimeError("boom")

    monkeypatch.setitem(translate_session.UPDATE_HANDLERS, "plan", broken)
    out = feed(SessionTranslator(), {"sessionUpdate": "plan", "entries": []})
    assert types(out) == ["agent.unparsed"] and "boom" in out[0].data["error"]


def test_raw_hash_is_sha256_of_the_payload() -> None:
    assert raw_hash(None) is None
    assert raw_hash("not json") == raw_hash(b"not json")
    assert raw_hash({"a": 1}) != raw_hash({"a": 2})
    digest = raw_hash({"a": 1})
    assert digest is not None and digest.startswith("sha256:") and len(digest) == 7 + 64


# ---- sandbox-agent extensions ---------------------------------------------------------------
def test_unparsed_requested_by_the_agent() -> None:
    t = SessionTranslator()
    update = {
        "sessionUpdate": "_vendor/thing",
        "raw": "mock",
        "_meta": {"sandbox-agent/unparsed": {"error": "unsupported payload", "location": "mock.stream"}},
    }
    out = feed(t, update)
    assert types(out) == ["agent.unparsed"]
    assert out[0].data["error"] == "unsupported payload" and out[0].data["location"] == "mock.stream"
    assert out[0].data["raw_hash"].startswith("sha256:") and out[0].raw["params"]["update"] == update
    given = {"sessionUpdate": "x", "_meta": {"sandbox-agent/unparsed": {"rawHash": "h"}}}
    assert feed(t, given)[0].data == {"error": "unsupported payload", "location": "session/update", "raw_hash": "h"}


def test_agent_error_notification() -> None:
    t = SessionTranslator()
    feed(t, text_chunk("working", "m"))
    params = {"sessionId": "s", "message": "Mock error event.", "code": "mock_error", "details": {"mock": True}}
    message = {"jsonrpc": "2.0", "method": "_sandbox-agent/error", "params": params}
    out = t.agent_error(params, message)
    assert types(out) == ["item.completed", "error"]
    assert out[1].data == {"message": "Mock error event.", "code": "mock_error", "details": {"mock": True}}
    assert out[1].synthetic is False and out[1].raw is message
    synthetic = t.agent_error({**params, "code": 42, "_meta": {"sandbox-agent/synthetic": True}}, message)
    assert synthetic[0].synthetic is True and synthetic[0].data["code"] == "42"
    assert types(t.agent_error({"sessionId": "s"}, message)) == ["agent.unparsed"]


def test_synthetic_meta_on_the_notification() -> None:
    t = SessionTranslator()
    message = notification(text_chunk("x", "m"), _meta={"sandbox-agent/synthetic": True})
    assert all(d.synthetic for d in t.session_update(message["params"], message))


def test_session_end_on_the_prompt_result_replaces_turn_ended() -> None:
    t = SessionTranslator()
    feed(t, text_chunk("bye", "m"))
    meta = {"sandbox-agent/sessionEnd": {"terminatedBy": "agent"}}
    out = end_turn(t, meta=meta)
    assert types(out) == ["item.completed", "session.ended"]
    assert out[-1].data == {"reason": "completed", "terminated_by": "agent"} and out[-1].synthetic
    error_end = {
        "sandbox-agent/sessionEnd": {
            "reason": "error",
            "message": "quota exhausted",
            "exitCode": 3,
            "stderr": {"head": "h", "truncated": False, "totalLines": 1},
        }
    }
    data = end_turn(t, meta=error_end)[-1].data
    assert data == {
        "reason": "error",
        "terminated_by": "agent",
        "message": "quota exhausted",
        "exit_code": 3,
        "stderr": {"head": "h", "truncated": False, "total_lines": 1},
    }
    cancelled = t.turn_ended("t", {"stopReason": "cancelled", "meta": {"sandbox-agent/sessionEnd": {}}}, None)
    assert cancelled[-1].data["reason"] == "terminated"
    assert types(end_turn(t, meta={"other": 1})) == ["turn.ended"]


def test_rpc_error_data_takes_the_legacy_error_type() -> None:
    assert rpc_error_data(-32603, "boom", {"details": "x"}) == {
        "message": "boom",
        "code": "-32603",
        "details": {"details": "x"},
    }
    data = {"_meta": {"sandbox-agent/errorType": "agent_process_exited"}}
    assert rpc_error_data(-32000, "gone", data)["code"] == "agent_process_exited"


def test_turn_started_records_the_user_item_and_closes_leftovers() -> None:
    t = SessionTranslator()
    feed(t, text_chunk("left open", "m"))
    raw = {"method": "session/prompt", "params": {}}
    out = t.turn_started("turn_2", "Hi", [{"type": "file_ref", "path": "/a", "action": "read", "diff": None}], raw)
    assert types(out) == ["item.completed", "turn.started", "item.started", "item.completed"]
    assert out[1].data == {"phase": "started", "turn_id": "turn_2"} and out[1].raw is raw
    assert [p["type"] for p in out[3].data["item"]["content"]] == ["text", "file_ref"]
    assert out[3].data["item"]["native_item_id"] == "user_1"


def test_the_mock_user_item_is_the_legacy_one() -> None:
    """mock_<n>_user with n counting every message (empty ones too), trimmed, from the agent."""
    t = SessionTranslator(user_item=MOCK_USER_ITEM)
    assert [d.type for d in t.turn_started("turn_1", "   ", [], raw=None)] == ["turn.started"]
    out = t.turn_started("turn_2", "  hi  ", [], raw=None)
    assert [d.type for d in out] == ["turn.started", "item.started", "item.completed"]
    items = [d.data["item"] for d in out[1:]]
    assert [i["native_item_id"] for i in items] == ["mock_2_user", "mock_2_user"]
    assert items[1]["content"] == [{"type": "text", "text": "hi"}]
    assert [d.synthetic for d in out] == [True, False, False]
    image = {"type": "image", "path": "/tmp/a.png", "mime": "image/png"}
    listed = t.turn_started("turn_3", "look", [image], raw=None)[1].data["item"]
    assert listed["content"] == [{"type": "text", "text": "look\n\nAttachments:\n- /tmp/a.png"}]
    default = SessionTranslator()
    default.turn_started("turn_1", "", [], raw=None)
    mine = default.turn_started("turn_2", " hi ", [], raw=None)[1].data["item"]
    assert mine["native_item_id"] == "user_1" and mine["content"] == [{"type": "text", "text": " hi "}]


def test_a_prompt_result_may_ask_for_no_turn_ended() -> None:
    """Legacy's mock recorded no turn.ended when its script ended asking a person."""
    t = SessionTranslator()
    feed(t, text_chunk("asking", "m"))
    out = end_turn(t, meta={"sandbox-agent/turnEnded": False})
    assert types(out) == ["item.completed"]
    ended = end_turn(t, meta={"sandbox-agent/turnEnded": True, "quota": {"tokens": 3}})
    assert types(ended) == ["turn.ended"]
    assert "meta" not in ended[0].data["metadata"]  # the result's own _meta stays in raw
