"""A create whose agent fails in the handshake says why: its last stderr lines, and the auth
methods or variables that would work, not a bare status (a real server, the mock agent started
through a shell that first writes to stderr)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import start_bridge


def test_a_start_that_times_out_answers_with_the_agents_stderr(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    line = "echo 'stalled: please run: agent login' >&2; exec " + sys.executable + " -m app.agents.mock"
    agents.write_text(
        "[agents.stalling]\n"
        f'command = ["sh", "-c", "{line}"]\n'
        'env = { ACP_BRIDGE_MOCK_STALL = "session/new" }\n'  # the mock answers it only once withdrawn
    )
    bridge = start_bridge(tmp_path, "--agents-file", str(agents), env={"ACP_BRIDGE_AGENT_START_TIMEOUT": "2"})
    try:
        response = bridge.client(timeout=30).post("/v1/sessions/s", json={"agent": "stalling"})
        assert response.status_code == 504, response.text
        details = response.json()["details"]
        assert "initialize/session/new in 2.0s" in details["message"]
        assert details["stderr"].endswith("stalled: please run: agent login")
    finally:
        bridge.stop()
