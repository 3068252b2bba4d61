"""A real agent's conversation goes on through bridge restarts: codex (legacy id ``codex``, codex-acp
against the fake LLM, in a loopback-only network namespace) is told a message, the bridge is killed
with SIGKILL and started again on the same data dir, the session gets a second message, the bridge is
stopped with SIGTERM and started again, and the session gets a third (``tests/realagents/restart.py``).
codex-acp advertises ``session/resume`` and ``loadSession``: the bridge continues it with
``session/resume``; run again with resume hidden from the bridge (``hide_capability.py``), with
``session/load``, whose replayed history must not be logged again.

The proof that the conversation continued is in the model requests: after each restart the agent's
request to the fake LLM still carries the earlier user messages. Fails like the other real-agent tests
when the namespace, npm or the registry is missing (skips outside CI, and with
``ACP_BRIDGE_TEST_REAL_AGENTS=0``).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

from tests.realagents.legacy import ready
from tests.realagents.netns import driver_report
from tests.realagents.restart import MESSAGES

DRIVER_TIMEOUT = 300.0
META = "sandbox-agent/resume"

# Real agents from npm in a loopback-only network namespace (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("netns", "npm")


@pytest.fixture(scope="module", params=["session/resume", "session/load"], ids=["resume", "load"])
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    method: str = request.param
    ready("codex")
    out = tmp_path_factory.mktemp("restart-codex") / "report.json"
    argv = [sys.executable, "-m", "tests.realagents.restart", "--agent", "codex", "--out", str(out)]
    if method == "session/load":
        argv += ["--hide", "sessionCapabilities.resume"]
    result = driver_report(argv, out, DRIVER_TIMEOUT)
    assert result["create"]["status"] == 200, result["create"]
    print(f"codex through restarts ({method}): timings {result['timings']}")
    result["method"] = method
    return result


def _item(event: dict[str, Any]) -> dict[str, Any] | None:
    item: dict[str, Any] | None = event["data"].get("item") if event["type"] == "item.completed" else None
    return item


def _texts(evs: list[dict[str, Any]], role: str) -> list[str]:
    return [
        "".join(p.get("text", "") for p in item["content"] if p["type"] == "text")
        for item in map(_item, evs)
        if item and item["kind"] == "message" and item["role"] == role
    ]


def _restart_meta(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in map(_item, evs):
        if item and item["kind"] == "status" and item["content"][0].get("label") == "restart":
            out.append(next(p["json"]["_meta"][META] for p in item["content"] if p["type"] == "json"))
    return out


def test_each_restart_continues_the_agents_session(report: dict[str, Any]) -> None:
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert list(stages) == ["created", "kill", "term"]
    native = report["create"]["body"]["nativeSessionId"]
    for name, cause in (("kill", "crash"), ("term", "shutdown")):
        stage = stages[name]
        assert stage["info_before"]["ended"] is False
        assert stage["info_before"]["_meta"][META] == {"state": "suspended", "cause": cause}
        assert stage["send"]["status"] == 204, stage["send"]
        (meta,) = _restart_meta(stage["events"])
        assert meta["method"] == report["method"] and meta["memory"] == "kept", meta
        if meta["method"] == "session/load":
            assert meta["replayed"] > 0, meta  # codex replayed its history, which is not logged again
        assert meta["nativeSessionId"] == meta["previousNativeSessionId"] == native
        assert meta["failed"] == []
        # codex-acp offers session/list: asked first, it still listed the session.
        assert meta["listed"] is True, meta
        after = stage["info_after"]["_meta"][META]
        assert after == meta and meta["state"] == "restarted" and meta["cause"] == cause, after
        assert stage["info_after"]["nativeSessionId"] == native
        ended = [e for e in stage["events"] if e["type"] == "turn.ended"]
        assert ended[-1]["data"]["metadata"]["stopReason"] == "end_turn", ended


def test_the_model_sees_the_earlier_messages_after_each_restart(report: dict[str, Any]) -> None:
    """The agent's request after a restart carries what it was told before it: the conversation
    went on in the agent, not only in the bridge's log."""
    requests = report["llm_requests"]
    for number, message in enumerate(MESSAGES):
        asked = [r for r in requests if r["tools"] and r["user_texts"] and r["user_texts"][-1] == message]
        assert asked, f"no model request for message {number + 1}: {[r['user_texts'][-1:] for r in requests]}"
        for request in asked:
            ours = [text for text in request["user_texts"] if text in MESSAGES]
            assert ours == list(MESSAGES[: number + 1]), request["user_texts"]


def test_the_log_has_every_event_once(report: dict[str, Any]) -> None:
    evs = report["events"]
    assert [e["sequence"] for e in evs] == list(range(1, len(evs) + 1))
    assert len({e["event_id"] for e in evs}) == len(evs)
    started = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.started")
    completed = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.completed")
    assert all(n == 1 for n in started.values()) and started == completed, (started, completed)
    assert _texts(evs, "user") == list(MESSAGES)
    assert len(_texts(evs, "assistant")) == len(MESSAGES)  # one reply per message, none replayed
    turns = [e["data"]["turn_id"] for e in evs if e["type"] == "turn.started"]
    assert turns == ["turn_1", "turn_2", "turn_3"]
    assert turns == [e["data"]["turn_id"] for e in evs if e["type"] == "turn.ended"]
    assert [m["state"] for m in _restart_meta(evs)] == ["suspended", "restarted", "suspended", "restarted"]
    assert not [e for e in evs if e["type"] in ("agent.unparsed", "error", "session.ended")]


def test_no_agent_process_of_an_old_run_is_left(report: dict[str, Any]) -> None:
    for stage in report["stages"][1:]:
        stopped = stage["stopped"]
        assert stopped["agent_pids"], "the old bridge ran an agent"
        assert stopped["alive_after_restart"] == [], stopped
    assert report["stages"][1]["stopped"]["returncode"] == -9
    assert report["terminate_status"] == 204 and report["alive_after_terminate"] == []
