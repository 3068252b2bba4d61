"""A permission the agent asked before its bridge died (``kill -9``), answered after a restart on the
same data dir: the 400 says that the request died with the agent when the bridge stopped, not a bare
"unknown permission id" (docs/troubleshooting.md). In a fleet the same is said naming the bridge that
ran it (tests/e2e/test_fleet.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import create_session, send, start_bridge, until_type, wait_for_events


def test_a_reply_after_the_bridge_died_says_the_request_died_with_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bridge = start_bridge(tmp_path, data_dir=data)
    try:
        client = bridge.client()
        create_session(client, "asked")
        send(client, "asked", "permission")  # the mock asks twice; its turn ends asking
        wait_for_events(client, "asked", until_type("permission.requested"))
    finally:
        bridge.proc.kill()  # no clean stop: the agent dies with its bridge
        bridge.proc.wait(10)
    again = start_bridge(tmp_path, data_dir=data)
    try:
        client = again.client()
        reply = client.post("/v1/sessions/asked/permissions/mock_1_permission/reply", json={"reply": "once"})
        assert reply.status_code == 400, reply.text
        assert reply.json()["detail"] == (
            "invalid request: unknown permission id: mock_1_permission: the request died with the session's "
            "agent when the bridge stopped; it was closed as rejected and can no longer be answered"
        )
        unknown = client.post("/v1/sessions/asked/permissions/never-asked/reply", json={"reply": "once"})
        assert unknown.json()["detail"] == "invalid request: unknown permission id: never-asked"
    finally:
        again.stop()
