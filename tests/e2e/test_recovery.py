"""Sessions survive the bridge: a kill -9 or SIGTERM of the bridge, a restart on the same data dir,
and the conversation goes on (session/resume, session/load, or session/new that says the memory was
lost). Orphaned agents and terminals of the killed run are ended. Real bridge and agent processes."""

from __future__ import annotations

import signal
import sqlite3
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import (
    PROBES,
    Bridge,
    create_session,
    descendants,
    events,
    pid_alive,
    send,
    start_bridge,
    types,
    until_type,
    wait_for_events,
    wait_until,
)

META = "sandbox-agent/resume"


def _agents_file(tmp: Path) -> Path:
    agents = tmp / "agents.toml"
    state = tmp / "probe-state"
    lines = []
    for name, mode in (("mem-load", "load"), ("mem-resume", "resume"), ("mem-none", ""), ("mem-refuse", "refuse")):
        lines += [
            f"[agents.{name}]",
            f'command = ["{sys.executable}", "{PROBES / "memory_agent.py"}"]',
            f'env = {{ PROBE_MEMORY = "{mode}", PROBE_STATE_DIR = "{state}" }}',
            "",
        ]
    lines += [
        "[agents.stubborn]",
        f'command = ["{sys.executable}", "{PROBES / "probe_agent.py"}"]',
        'env = { PROBE_MODE = "stubborn" }',
        "",
    ]
    agents.write_text("\n".join(lines))
    return agents


def _start(tmp: Path, data: Path) -> Bridge:
    return start_bridge(tmp, "--agents-file", str(_agents_file(tmp)), data_dir=data)


def _on_disk(bridge: Bridge) -> None:
    """Wait until the store holds every event the bridge has shown so far (what a reader saw is
    committed before it is shown; this wait makes the tests independent of how soon)."""
    shown = {s["sessionId"]: s["eventCount"] for s in bridge.client().get("/v1/sessions").json()["sessions"]}
    path = bridge.data_dir / "events.sqlite3"

    def committed() -> bool:
        query = "SELECT s.id, count(*) FROM sessions s JOIN events e ON e.session_key = s.key GROUP BY s.id"
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
                rows = db.execute(query).fetchall()
        except sqlite3.Error:
            return False
        stored = dict(rows)
        return all(stored.get(sid, 0) >= count for sid, count in shown.items())

    assert wait_until(committed, 10), "events not committed"


def _kill9(bridge: Bridge) -> None:
    _on_disk(bridge)
    for client in bridge.clients:
        client.close()
    bridge.proc.send_signal(signal.SIGKILL)
    bridge.proc.wait(10)


def _sigterm(bridge: Bridge) -> None:
    bridge.stop()  # SIGTERM: uvicorn shuts down, then ends by the signal it got
    assert bridge.proc.returncode in (0, -signal.SIGTERM), bridge.log()


def _texts(evs: list[dict[str, Any]], role: str = "assistant") -> list[str]:
    """The text of every completed message item of ``role``."""
    out = []
    for event in evs:
        item = event["data"].get("item") if event["type"] == "item.completed" else None
        if item and item["kind"] == "message" and item["role"] == role:
            out.append("".join(p.get("text", "") for p in item["content"] if p["type"] == "text"))
    return out


def _status_meta(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``_meta["sandbox-agent/resume"]`` of every completed restart status item."""
    out = []
    for event in evs:
        item = event["data"].get("item") if event["type"] == "item.completed" else None
        if item and item["kind"] == "status" and item["content"][0].get("label") == "restart":
            out.append(next(p["json"]["_meta"][META] for p in item["content"] if p["type"] == "json"))
    return out


def _assert_log_is_sound(evs: list[dict[str, Any]]) -> None:
    """Sequences without gap, each item started and completed once, one turn.ended per turn."""
    assert [e["sequence"] for e in evs] == list(range(1, len(evs) + 1))
    started = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.started")
    completed = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.completed")
    assert all(n == 1 for n in started.values()), started
    assert started == completed
    turns = Counter(e["data"]["turn_id"] for e in evs if e["type"] == "turn.started")
    assert all(n == 1 for n in turns.values()), turns
    assert turns == Counter(e["data"]["turn_id"] for e in evs if e["type"] == "turn.ended")
    assert types(evs).count("session.ended") <= 1


def _info(client: httpx.Client, session_id: str) -> dict[str, Any]:
    listed = client.get("/v1/sessions").json()["sessions"]
    return next(s for s in listed if s["sessionId"] == session_id)


def _turn(client: httpx.Client, session_id: str, message: str) -> list[dict[str, Any]]:
    offset = len(events(client, session_id))
    send(client, session_id, message)
    return wait_for_events(client, session_id, until_type("turn.ended"), offset=offset)


@pytest.mark.parametrize(
    ("agent", "method", "stop"),
    [
        ("mem-load", "session/load", _kill9),
        ("mem-resume", "session/resume", _kill9),
        ("mem-load", "session/load", _sigterm),
        ("mem-resume", "session/resume", _sigterm),
    ],
    ids=["load-kill9", "resume-kill9", "load-sigterm", "resume-sigterm"],
)
def test_a_conversation_goes_on_after_a_restart(tmp_path: Path, agent: str, method: str, stop: Any) -> None:
    data = tmp_path / "data"
    first = _start(tmp_path, data)
    client = first.client()
    create_session(client, "conv", agent=agent)
    _turn(client, "conv", "alpha")
    _turn(client, "conv", "beta")
    before = events(client, "conv")
    stop(first)

    second = _start(tmp_path, data)
    try:
        client = second.client()
        info = _info(client, "conv")
        cause = "crash" if stop is _kill9 else "shutdown"
        assert info["ended"] is False
        assert info["_meta"][META] == {"state": "suspended", "cause": cause}
        restored = events(client, "conv")
        assert restored[: len(before)] == before
        assert _status_meta(restored[len(before) :]) == [{"state": "suspended", "cause": cause}]

        turn = _turn(client, "conv", "gamma")
        assert _texts(turn)[-1] == "memory: [alpha | beta] now: gamma"
        meta = _status_meta(turn)
        assert len(meta) == 1 and meta[0]["method"] == method and meta[0]["memory"] == "kept"
        if method == "session/load":
            assert meta[0]["replayed"] == 4  # two turns, a user and an agent message each
        info = _info(client, "conv")
        assert info["_meta"][META]["state"] == "restarted" and info["_meta"][META]["method"] == method

        whole = events(client, "conv")
        _assert_log_is_sound(whole)
        # The replayed history was not logged again: each reply is there once, each user item too.
        replies = _texts(whole)
        assert Counter(replies)["memory: [] now: alpha"] == 1
        assert Counter(replies)["memory: [alpha] now: beta"] == 1
        assert _texts(whole, "user") == ["alpha", "beta", "gamma"]
        turn_ids = [e["data"]["turn_id"] for e in whole if e["type"] == "turn.started"]
        assert turn_ids == ["turn_1", "turn_2", "turn_3"]
    finally:
        second.stop()


def test_an_agent_that_cannot_continue_gets_a_new_session_that_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _start(tmp_path, data)
    client = first.client()
    create_session(client, "forgot", agent="mem-refuse")
    create_session(client, "plain", agent="mem-none")
    for sid in ("forgot", "plain"):
        _turn(client, sid, "alpha")
    _kill9(first)
    second = _start(tmp_path, data)
    try:
        client = second.client()
        for sid, failed in (("forgot", ["session/resume", "session/load"]), ("plain", [])):
            turn = _turn(client, sid, "beta")
            assert _texts(turn)[-1] == "memory: [] now: beta"
            (meta,) = _status_meta(turn)
            assert meta["method"] == "session/new" and meta["memory"] == "lost"
            assert [f["method"] for f in meta["failed"]] == failed
            assert meta["nativeSessionId"] != meta["previousNativeSessionId"]
            status = next(e for e in turn if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "status")
            text = status["data"]["item"]["content"][1]["text"]
            assert "memory of the conversation was lost" in text
            info = _info(client, sid)
            assert info["nativeSessionId"] == meta["nativeSessionId"]
            _assert_log_is_sound(events(client, sid))
    finally:
        second.stop()


@pytest.mark.parametrize("stop", [_kill9, _sigterm], ids=["kill9", "sigterm"])
def test_a_stop_mid_turn_ends_the_turn_and_resolves_pending_requests(tmp_path: Path, stop: Any) -> None:
    data = tmp_path / "data"
    first = _start(tmp_path, data)
    client = first.client()
    create_session(client, "busy", agent="mem-load")
    _turn(client, "busy", "alpha")
    send(client, "busy", "slow beta")
    wait_for_events(client, "busy", lambda evs: "memory: [alpha] now: slow beta" in str(evs[-1:]), offset=0)
    create_session(client, "asks")  # the mock: two permission requests left pending
    send(client, "asks", "permission")
    wait_for_events(client, "asks", until_type("permission.requested", 2))
    before = {sid: events(client, sid) for sid in ("busy", "asks")}
    stop(first)

    second = _start(tmp_path, data)
    try:
        client = second.client()
        added = {sid: events(client, sid)[len(old) :] for sid, old in before.items()}
        assert types(added["busy"]) == ["item.completed", "turn.ended", "item.started", "item.completed"]
        assert added["busy"][0]["data"]["item"]["status"] == "failed"
        assert added["busy"][1]["data"]["turn_id"] == "turn_2"
        assert added["busy"][1]["data"]["metadata"]["stopReason"] == "error"
        resolved = [e for e in added["asks"] if e["type"] == "permission.resolved"]
        requested = [e for e in before["asks"] if e["type"] == "permission.requested"]
        assert [e["data"]["permission_id"] for e in resolved] == [e["data"]["permission_id"] for e in requested]
        assert {e["data"]["status"] for e in resolved} == {"reject"}
        assert "turn.ended" in types(added["asks"])
        for sid in ("busy", "asks"):
            _assert_log_is_sound(events(client, sid))
            response = client.post(f"/v1/sessions/{sid}/permissions/permission_1/reply", json={"reply": "once"})
            assert response.status_code == 400
        # The mock reloads its history: the earlier message is remembered.
        turn = _turn(client, "asks", "history")
        assert _texts(turn)[-1] == "Earlier messages in this session:\n1. permission"
        assert _status_meta(turn)[0]["method"] == "session/load"
        turn = _turn(client, "busy", "gamma")
        assert _texts(turn)[-1] == "memory: [alpha | slow beta] now: gamma"
        for sid in ("busy", "asks"):
            _assert_log_is_sound(events(client, sid))
    finally:
        second.stop()


def test_ended_sessions_stay_ended_and_unrestartable_agents_end_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _start(tmp_path, data)
    client = first.client()
    create_session(client, "done", agent="mem-load")
    assert client.post("/v1/sessions/done/terminate").status_code == 204
    create_session(client, "gone", agent="mem-load")
    _turn(client, "gone", "alpha")
    _kill9(first)

    # The agent is no longer configured: its sessions cannot start it again.
    agents = _agents_file(tmp_path)
    agents.write_text(agents.read_text().replace("[agents.mem-load]", "[agents.other]"))
    second = start_bridge(tmp_path, "--agents-file", str(agents), data_dir=data)
    try:
        client = second.client()
        assert _info(client, "done")["ended"] is True and "_meta" not in _info(client, "done")
        assert types(events(client, "done")).count("session.ended") == 1
        response = client.post("/v1/sessions/done/messages", json={"message": "hi"})
        assert response.status_code == 400

        assert _info(client, "gone")["ended"] is False
        response = client.post("/v1/sessions/gone/messages", json={"message": "beta"})
        assert response.status_code == 404, response.text
        assert response.json()["type"] == "urn:sandbox-agent:error:agent_not_installed"
        evs = events(client, "gone")
        ended = [e for e in evs if e["type"] == "session.ended"]
        assert len(ended) == 1 and ended[0]["data"]["reason"] == "error"
        assert "cannot restart the agent" in ended[0]["data"]["message"]
        assert _info(client, "gone")["ended"] is True
        response = client.post("/v1/sessions/gone/messages", json={"message": "again"})
        assert response.status_code == 500
        assert len(events(client, "gone")) == len(evs)
    finally:
        second.stop()
    third = start_bridge(tmp_path, "--agents-file", str(agents), data_dir=data)
    try:
        client = third.client()
        for sid in ("done", "gone"):
            assert _info(client, sid)["ended"] is True
            assert types(events(client, sid)).count("session.ended") == 1
    finally:
        third.stop()


def test_orphans_of_a_killed_bridge_are_ended_at_the_next_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _start(tmp_path, data)
    client = first.client()
    create_session(client, "term")  # the mock, with a terminal that runs a shell and its child
    turn = _turn(client, "term", "spawn sh -c 'sleep 300 & echo started; wait'")
    assert "started" in _texts(turn)[-1]
    create_session(client, "stub", agent="stubborn")  # ignores SIGTERM and stdin EOF, has a child
    create_session(client, "idle", agent="mem-load")
    old = descendants(first.proc.pid)
    assert len(old) >= 7, old  # 3 agents, a terminal shell, its sleep, the stubborn agent's sleep...
    _kill9(first)
    alive_after_kill = {pid for pid in old if pid_alive(pid)}
    assert alive_after_kill, "the test needs processes that outlive the bridge"

    second = _start(tmp_path, data)
    try:
        assert wait_until(lambda: not any(pid_alive(pid) for pid in old), 5.0), [pid for pid in old if pid_alive(pid)]
    finally:
        second.stop()
