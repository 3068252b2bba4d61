"""ACP v1 methods stabilised this year, spoken with a real agent process (the built-in mock):
`session/close` at terminate, `$/cancel_request` for requests the bridge gives up on, `session/list`
at recovery; and what `initialize` advertises. The wire is read from the session's transcript."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support import (
    Bridge,
    create_session,
    events,
    send,
    start_bridge,
    types,
    until_type,
    wait_for_events,
)

META = "sandbox-agent/resume"


def _agents_file(tmp: Path, stall: str) -> Path:
    """The mock under another id (keeping its sessions in ``tmp``), stalling ``stall`` until the
    client withdraws it."""
    path = tmp / "agents.toml"
    path.write_text(
        "[agents.stalling]\n"
        f'command = ["{sys.executable}", "-m", "app.agents.mock"]\n'
        f'env = {{ ACP_BRIDGE_MOCK_STALL = "{stall}", ACP_BRIDGE_MOCK_STATE_DIR = "{tmp / "mock-state"}" }}\n'
    )
    return path


def _bridge(tmp: Path, *args: str, data: Path | None = None, **env: str) -> Bridge:
    return start_bridge(tmp, *args, data_dir=data, env={"ACP_BRIDGE_TRANSCRIPT_DIR": str(tmp / "wire"), **env})


def _wire(tmp: Path, session_id: str, run: int = 0) -> list[dict[str, Any]]:
    """Every message of the session's transcript (``run`` 1: that of the agent started again)."""
    path = tmp / "wire" / (f"{session_id}.jsonl" if run == 0 else f"{session_id}.{run}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sent(lines: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [line["msg"] for line in lines if line["dir"] == "client->agent" and line["msg"].get("method") == method]


def _answer(lines: list[dict[str, Any]], request_id: Any) -> dict[str, Any]:
    return next(
        line["msg"]
        for line in lines
        if line["dir"] == "agent->client" and "method" not in line["msg"] and line["msg"].get("id") == request_id
    )


def _turn(client: Any, session_id: str, message: str) -> list[dict[str, Any]]:
    offset = len(events(client, session_id))
    send(client, session_id, message)
    return wait_for_events(client, session_id, until_type("turn.ended"), offset=offset)


def _restart_meta(evs: list[dict[str, Any]]) -> dict[str, Any]:
    for event in evs:
        item = event["data"].get("item") if event["type"] == "item.completed" else None
        if item and item["kind"] == "status" and item["content"][0].get("label") == "restart":
            meta = next(p["json"]["_meta"][META] for p in item["content"] if p["type"] == "json")
            if meta["state"] == "restarted":
                return dict(meta)
    raise AssertionError("no restart status item")


def test_terminate_closes_the_agent_session_before_stopping_it(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path)
    try:
        client = bridge.client()
        create_session(client, "closing")
        _turn(client, "closing", "Reply with exactly the single word OK.")
        assert client.post("/v1/sessions/closing/terminate").status_code == 204
        lines = _wire(tmp_path, "closing")
        init = _answer(lines, _sent(lines, "initialize")[0]["id"])
        assert init["result"]["agentCapabilities"]["sessionCapabilities"]["close"] == {}
        (close,) = _sent(lines, "session/close")
        native = client.get("/v1/sessions").json()["sessions"][0]["nativeSessionId"]
        assert close["params"] == {"sessionId": native}
        assert _answer(lines, close["id"])["result"] == {}
        assert not _sent(lines, "$/cancel_request")
        assert types(events(client, "closing")).count("session.ended") == 1
    finally:
        bridge.stop()


def test_a_close_the_agent_does_not_answer_is_withdrawn_with_cancel_request(tmp_path: Path) -> None:
    agents = _agents_file(tmp_path, "session/close")
    bridge = _bridge(tmp_path, "--agents-file", str(agents), ACP_BRIDGE_SESSION_CLOSE_TIMEOUT="0.5")
    try:
        client = bridge.client()
        create_session(client, "stuck", agent="stalling")
        started = time.monotonic()
        assert client.post("/v1/sessions/stuck/terminate").status_code == 204
        assert time.monotonic() - started < 5
        lines = _wire(tmp_path, "stuck")
        (close,) = _sent(lines, "session/close")
        (withdraw,) = _sent(lines, "$/cancel_request")
        assert withdraw["params"] == {"requestId": close["id"]} and "id" not in withdraw
        # ACP: the agent still answers the withdrawn request, with -32800.
        assert _answer(lines, close["id"])["error"]["code"] == -32800
        evs = events(client, "stuck")
        assert types(evs).count("session.ended") == 1 and evs[-1]["data"]["reason"] == "terminated"
    finally:
        bridge.stop()


def test_a_second_terminate_waits_for_the_same_end(tmp_path: Path) -> None:
    agents = _agents_file(tmp_path, "session/close")
    bridge = _bridge(tmp_path, "--agents-file", str(agents), ACP_BRIDGE_SESSION_CLOSE_TIMEOUT="1")
    try:
        client = bridge.client()
        create_session(client, "twice", agent="stalling")

        def terminate(_: int) -> tuple[int, float]:
            started = time.monotonic()
            status = client.post("/v1/sessions/twice/terminate").status_code
            return status, time.monotonic() - started

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(terminate, range(2)))
        # Both answered once the session had ended: after the unanswered close's second.
        assert [status for status, _ in answers] == [204, 204]
        assert all(took >= 0.9 for _, took in answers), answers
        evs = events(client, "twice")
        assert types(evs).count("session.ended") == 1
        assert client.get("/v1/sessions").json()["sessions"][0]["ended"] is True
    finally:
        bridge.stop()


def test_no_close_with_a_zero_timeout(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path, ACP_BRIDGE_SESSION_CLOSE_TIMEOUT="0")
    try:
        client = bridge.client()
        create_session(client, "plain")
        assert client.post("/v1/sessions/plain/terminate").status_code == 204
        assert not _sent(_wire(tmp_path, "plain"), "session/close")
    finally:
        bridge.stop()


def test_recovery_asks_the_agent_which_sessions_it_still_knows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _bridge(tmp_path, data=data)
    client = first.client()
    for sid in ("kept", "forgotten"):
        create_session(client, sid)
        _turn(client, sid, "Reply with exactly the single word OK.")
    first.stop()  # SIGTERM: both sessions are suspended, for the next run
    # The agent loses what it kept of one of them.
    native = "mock-forgotten"
    for path in (data / "mock").glob("*.jsonl"):
        if json.loads(path.read_text().splitlines()[0]).get("sessionId") == native:
            path.unlink()
    second = _bridge(tmp_path, data=data)
    try:
        client = second.client()
        meta = _restart_meta(_turn(client, "kept", "history"))
        assert meta["listed"] is True and meta["method"] == "session/load" and meta["memory"] == "kept"
        meta = _restart_meta(_turn(client, "forgotten", "history"))
        # Not listed: no resume or load is tried, a new session at once.
        assert meta["listed"] is False and meta["method"] == "session/new" and meta["failed"] == []
        lines = _wire(tmp_path, "forgotten", 1)
        (listing,) = _sent(lines, "session/list")
        assert listing["params"]["cwd"]
        assert not _sent(lines, "session/load")
    finally:
        second.stop()


def test_a_list_the_agent_does_not_answer_is_withdrawn_and_recovery_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agents = _agents_file(tmp_path, "session/list")
    first = _bridge(tmp_path, "--agents-file", str(agents), data=data)
    client = first.client()
    create_session(client, "slow", agent="stalling")
    _turn(client, "slow", "Reply with exactly the single word OK.")
    first.stop()
    # One page of session/list may take a third of the start timeout.
    second = _bridge(tmp_path, "--agents-file", str(agents), data=data, ACP_BRIDGE_AGENT_START_TIMEOUT="6")
    try:
        client = second.client()
        meta = _restart_meta(_turn(client, "slow", "history"))
        assert "listed" not in meta and meta["method"] == "session/load"
        lines = _wire(tmp_path, "slow", 1)
        (listing,) = _sent(lines, "session/list")
        (withdraw,) = _sent(lines, "$/cancel_request")
        assert withdraw["params"] == {"requestId": listing["id"]}
        # Withdrawn before the bridge goes on.
        order = [line["msg"].get("method") for line in lines if line["dir"] == "client->agent"]
        assert order.index("$/cancel_request") < order.index("session/load")
        assert _answer(lines, listing["id"])["error"]["code"] == -32800
    finally:
        second.stop()


def test_initialize_advertises_what_the_bridge_serves(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path)
    try:
        client = bridge.client()
        create_session(client, "caps")
        lines = _wire(tmp_path, "caps")
        caps = _sent(lines, "initialize")[0]["params"]["clientCapabilities"]
        assert caps["fs"] == {"readTextFile": True, "writeTextFile": True}
        assert caps["terminal"] is True
        assert caps["elicitation"] == {"form": {}}  # no URL mode
        assert "auth" not in caps  # no terminal auth: the bridge runs no interactive login
    finally:
        bridge.stop()
