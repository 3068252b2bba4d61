"""A permission request that arrives before its tool call (claude-agent-acp does, about 1 in 20) is
held until the call is announced, so its action and always-allow keys are the vendor tool name in every
run; one whose call never comes is shown after a bounded wait."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.hitl_support import PROBE, of_type, permission, reply_permission, script, wait_count
from tests.support import Bridge, create_session, start_bridge


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Bridge]:
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[agents.claude-like]\ncommand = ["{sys.executable}", "{PROBE}"]\nprofile = "claude"\n')
    server = start_bridge(tmp_path, "--agents-file", str(agents), env={"ANTHROPIC_API_KEY": "sk-ant-test"})
    yield server
    server.stop()


def test_a_permission_before_its_tool_call_waits_for_the_call(bridge: Bridge) -> None:
    with httpx.Client(base_url=bridge.url, timeout=30) as client:
        create_session(client, "held", agent="claude-like")
        announce = {
            "sessionUpdate": "tool_call",
            "toolCallId": "toolu_1",
            "title": "Write",
            "kind": "edit",
            "status": "pending",
            "_meta": {"claudeCode": {"toolName": "Write"}},
        }
        message = script(
            requests=[permission("toolu_1", kind="edit", rawInput={"file_path": "/w/a"})], updates_after=[announce]
        )
        assert client.post("/v1/sessions/held/messages", json={"message": message}).status_code == 204
        (requested,) = of_type(wait_count(client, "held", "permission.requested"), "permission.requested")
        assert requested["data"]["action"] == "Write"
        assert requested["data"]["metadata"]["toolName"] == "Write"
        events = client.get("/v1/sessions/held/events", params={"offset": 0}).json()["events"]
        started = [e for e in of_type(events, "item.started") if e["data"]["item"]["kind"] == "tool_call"]
        assert started and started[0]["sequence"] < requested["sequence"]
        assert reply_permission(client, "held", "toolu_1", "once").status_code == 204
        wait_count(client, "held", "turn.ended")


def test_a_permission_whose_call_never_comes_is_shown_after_the_wait(bridge: Bridge) -> None:
    with httpx.Client(base_url=bridge.url, timeout=30) as client:
        create_session(client, "alone", agent="claude-like")
        started = time.monotonic()
        message = script(requests=[permission("toolu_9", kind="edit")])
        assert client.post("/v1/sessions/alone/messages", json={"message": message}).status_code == 204
        events = wait_count(client, "alone", "permission.requested", timeout=15)
        (requested,) = of_type(events, "permission.requested")
        assert time.monotonic() - started < 10
        assert requested["data"]["action"] == "edit"
        assert reply_permission(client, "alone", "toolu_9", "reject").status_code == 204
        wait_count(client, "alone", "turn.ended")
