"""Session ids every store keeps, and only those: an id too long for the documented bound (1,024
bytes of UTF-8) or holding a control character is refused at create with 400 ProblemDetails, on
SQLite and on a real PostgreSQL server (where such an id used to answer 200 and then never commit,
or 500 on every request); elsewhere such an id is simply not found. The log stays quiet and another
session's burst is unaffected."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import Bridge, create_session, events, send, start_bridge, wait_for_events

LONGEST = "é" * 512  # 1,024 bytes


def check_session_ids(server: Bridge) -> None:
    api = server.client()
    create_session(api, "burst")
    send(api, "burst", "burst 3000 64")  # runs while the bad creates come in
    for path, detail in (
        ("a" * 9000, "session id is 9000 bytes long; at most 1024 are allowed"),
        (LONGEST + "e", "session id is 1025 bytes long"),
        ("nul%00byte", "control character U+0000"),
        ("bell%07", "control character U+0007"),
        ("del%7F", "control character U+007F"),
        ("c1%C2%85", "control character U+0085"),
    ):
        response = api.post(f"/v1/sessions/{path}", json={"agent": "mock"})
        assert response.status_code == 400, (path[:20], response.status_code, response.text[:300])
        problem = response.json()
        assert problem["type"] == "urn:sandbox-agent:error:invalid_request" and problem["status"] == 400
        assert detail in problem["detail"], problem
        assert response.headers["content-type"] == "application/json"
        # Not found anywhere else, never a 500.
        assert api.get(f"/v1/sessions/{path}/events").status_code == 404
        assert api.post(f"/v1/sessions/{path}/messages", json={"message": "hi"}).status_code == 404
    # The longest id kept works like any other.
    create_session(api, LONGEST)
    send(api, LONGEST, "hello")
    wait_for_events(api, LONGEST, lambda evs: any(e["type"] == "turn.ended" for e in evs), timeout=30)
    listed = [s["sessionId"] for s in api.get("/v1/sessions").json()["sessions"]]
    assert LONGEST in listed and not any(len(s) > 1100 or "\x00" in s for s in listed)
    # The other session's burst, whole and in order.
    wait_for_events(api, "burst", lambda evs: any(e["type"] == "turn.ended" for e in evs), timeout=60)
    sequences = [e["sequence"] for e in events(api, "burst", limit=100_000)]
    assert sequences == list(range(1, len(sequences) + 1)) and len(sequences) > 3000
    log = server.log()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_session_ids_on_sqlite(tmp_path: Path) -> None:
    server = start_bridge(tmp_path)
    try:
        check_session_ids(server)
    finally:
        server.stop()


@pytest.mark.postgres
def test_session_ids_on_postgresql(tmp_path: Path, database_url: str) -> None:
    server = start_bridge(tmp_path, env={"ACP_BRIDGE_DATABASE_URL": database_url})
    try:
        check_session_ids(server)
    finally:
        server.stop()
