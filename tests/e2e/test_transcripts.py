"""Wire transcripts (`ACP_BRIDGE_TRANSCRIPT_DIR`): every JSON-RPC message of a session, both ways."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Bridge, create_session, send, start_bridge, until_type, wait_for_events

ODD_ID = "tx/../odd id"
ODD_ID_IN_URL = "tx%2F..%2Fodd%20id"


@pytest.fixture(scope="module")
def recording_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    tmp = tmp_path_factory.mktemp("transcripts")
    server = start_bridge(tmp, env={"ACP_BRIDGE_TRANSCRIPT_DIR": str(tmp / "wire")})
    server.transcripts = tmp / "wire"  # type: ignore[attr-defined]
    yield server
    server.stop()


def read_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last line is complete"
    return [json.loads(line) for line in text.splitlines()]


def test_a_session_is_recorded_both_ways_and_closed_at_terminate(recording_bridge: Bridge) -> None:
    client = recording_bridge.client()
    create_session(client, ODD_ID_IN_URL)
    send(client, ODD_ID_IN_URL, "Reply with exactly the single word OK.")
    wait_for_events(client, ODD_ID_IN_URL, until_type("turn.ended"))
    assert client.post(f"/v1/sessions/{ODD_ID_IN_URL}/terminate").status_code == 204

    wire: Path = recording_bridge.transcripts  # type: ignore[attr-defined]
    # The id is made file-name safe (no directory is escaped or created) and stays readable.
    assert [p.name for p in wire.iterdir()] == ["tx%2F..%2Fodd%20id.jsonl"]
    lines = read_lines(wire / "tx%2F..%2Fodd%20id.jsonl")
    assert all(list(line) == ["t", "dir", "msg"] for line in lines)
    times = [line["t"] for line in lines]
    assert times == sorted(times) and times[0] >= 0
    assert {line["dir"] for line in lines} == {"client->agent", "agent->client"}

    sent = [line["msg"] for line in lines if line["dir"] == "client->agent"]
    received = [line["msg"] for line in lines if line["dir"] == "agent->client"]
    assert [m.get("method") for m in sent if "method" in m][:3] == ["initialize", "session/new", "session/prompt"]
    prompt = next(m for m in sent if m.get("method") == "session/prompt")
    assert prompt["params"]["prompt"][0]["text"] == "Reply with exactly the single word OK."
    # Every request the bridge sent was answered, and each answer follows its request.
    for request in (m for m in sent if "method" in m and "id" in m):
        answer_at = next(
            i
            for i, line in enumerate(lines)
            if line["dir"] == "agent->client" and "method" not in line["msg"] and line["msg"].get("id") == request["id"]
        )
        assert lines.index(next(line for line in lines if line["msg"] is request)) < answer_at
    updates = [m for m in received if m.get("method") == "session/update"]
    assert any(u["params"]["update"]["sessionUpdate"] == "agent_message" for u in updates)  # the OK reply, whole
    assert any(m.get("result", {}).get("stopReason") == "end_turn" for m in received if "result" in m)


def test_each_session_gets_its_own_file(recording_bridge: Bridge) -> None:
    client = recording_bridge.client()
    for sid in ("tx-a", "tx-b"):
        create_session(client, sid)
        send(client, sid, "echo " + sid)
    for sid in ("tx-a", "tx-b"):
        wait_for_events(client, sid, until_type("turn.ended"))
        assert client.post(f"/v1/sessions/{sid}/terminate").status_code == 204
    wire: Path = recording_bridge.transcripts  # type: ignore[attr-defined]
    for sid in ("tx-a", "tx-b"):
        lines = read_lines(wire / f"{sid}.jsonl")
        sessions = {
            line["msg"]["params"].get("sessionId") for line in lines if line["msg"].get("method") == "session/update"
        }
        assert sessions == {f"mock-{sid}"}
        prompt = next(line["msg"] for line in lines if line["msg"].get("method") == "session/prompt")
        assert prompt["params"]["prompt"][0]["text"] == "echo " + sid
