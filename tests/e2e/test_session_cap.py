"""At most ``ACP_BRIDGE_MAX_SESSIONS`` live sessions: one more is refused with a 429 ProblemDetails,
ended ones do not count, and a session suspended by a restart counts once its agent runs again.
A real server and the mock agent."""

from __future__ import annotations

from pathlib import Path

from tests.support import create_session, send, start_bridge, until_type, wait_for_events


def test_a_session_beyond_the_cap_is_refused_until_one_ends(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_bridge(tmp_path, data_dir=data_dir, env={"ACP_BRIDGE_MAX_SESSIONS": "2"})
    try:
        client = server.client()
        create_session(client, "one")
        create_session(client, "two")
        refused = client.post("/v1/sessions/three", json={"agent": "mock"})
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == "application/json"
        assert refused.json() == {
            "type": "urn:sandbox-agent:error:invalid_request",
            "title": "Too Many Sessions",
            "status": 429,
            "detail": "too many sessions: 2 are live, the most this server runs (ACP_BRIDGE_MAX_SESSIONS); "
            "terminate one and try again",
            "details": {"code": "too_many_sessions", "limit": 2},
        }
        assert "three" not in [s["sessionId"] for s in client.get("/v1/sessions").json()["sessions"]]
        # The id check comes first, as legacy's order has it.
        assert client.post("/v1/sessions/one", json={"agent": "mock"}).status_code == 409
        assert client.post("/v1/sessions/one/terminate").status_code == 204
        create_session(client, "three")
        send(client, "three", "Reply with exactly the single word OK.")
        wait_for_events(client, "three", until_type("turn.ended"))
    finally:
        server.stop()
    # After a restart, live sessions come back suspended (no agent) and do not count until their
    # next message starts one.
    server = start_bridge(tmp_path, data_dir=data_dir, env={"ACP_BRIDGE_MAX_SESSIONS": "1"})
    try:
        client = server.client()
        create_session(client, "four")
        response = client.post("/v1/sessions/two/messages", json={"message": "hello"})
        assert response.status_code == 429, response.text
        assert client.post("/v1/sessions/four/terminate").status_code == 204
        send(client, "two", "Reply with exactly the single word OK.")
    finally:
        server.stop()
