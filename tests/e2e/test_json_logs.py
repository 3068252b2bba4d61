"""ACP_BRIDGE_LOG_FORMAT=json: every line the server writes is one JSON object; lines about a
session carry its id. Real server, real mock agent."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import create_session, start_bridge, wait_until


def test_json_log_lines_name_the_session(tmp_path: Path) -> None:
    bridge = start_bridge(tmp_path, env={"ACP_BRIDGE_LOG_FORMAT": "json", "ACP_BRIDGE_LOG_LEVEL": "info"})
    try:
        client = bridge.client()
        create_session(client, "json-log")
        assert client.post("/v1/sessions/json-log/terminate").status_code == 204
        # The agent's end is logged at info by the task that watched it.
        assert wait_until(lambda: "ended" in bridge.log() and "json-log" in bridge.log(), 10), bridge.log()
    finally:
        bridge.stop()
    lines = [line for line in bridge.log().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one object
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in entries), entries
    assert entries[0]["message"].startswith("acp-rest-bridge listening")  # the start-up line too
    assert any(e["logger"].startswith("uvicorn") for e in entries), entries  # uvicorn's lines too
    about = [e for e in entries if e.get("session_id") == "json-log"]
    assert any("agent pid" in e["message"] for e in about), entries
