"""Tokens, cost and exact diffs through a real server and the mock agent: ``usage`` reports a turn's
tokens (the prompt result's ``usage``) and the session's running cost (``usage_update``); ``edit``
changes a file and shows only trimmed snippets in its diff, as claude does. The bridge shows each
turn's usage and cost in ``turn.ended``, the totals in SessionInfo (kept across a restart) and in
``/metrics``, and a diff of the edit that applies to the file as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_metrics import scrape, value
from tests.realagents.diffcheck import applied
from tests.support import create_session, send, start_bridge, until_type, wait_for_events

TEN_LINES = "".join(f"line {i}\n" for i in range(1, 11))


def info(client: Any, session_id: str) -> dict[str, Any]:
    sessions = client.get("/v1/sessions").json()["sessions"]
    return next(s for s in sessions if s["sessionId"] == session_id)


def test_turn_usage_and_cost_reach_events_the_listing_and_metrics(tmp_path: Path) -> None:
    bridge = start_bridge(tmp_path)
    try:
        client = bridge.client()
        create_session(client, "u1")
        send(client, "u1", "usage 100 20 0.5")
        send(client, "u1", "usage 10 2 0.25")
        send(client, "u1", "hello")  # a turn that tells no usage
        evs = wait_for_events(client, "u1", until_type("turn.ended", 3))
        ended = [e["data"]["metadata"] for e in evs if e["type"] == "turn.ended"]
        assert ended[0]["usage"] == {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120}
        assert ended[0]["cost"] == {"amount": 0.5, "currency": "USD"}
        assert ended[0]["context"] == {"used": 120, "size": 200000}
        # The agent's cost runs over the session (0.5, then 0.75): the turn's is what it added.
        assert ended[1]["cost"] == {"amount": 0.25, "currency": "USD"} and ended[1]["usage"]["inputTokens"] == 10
        assert "usage" not in ended[2] and "cost" not in ended[2]
        totals = info(client, "u1")["_meta"]["sandbox-agent/usage"]
        assert totals == {
            "turns": 2,
            "inputTokens": 110,
            "outputTokens": 22,
            "totalTokens": 132,
            "cost": {"amount": 0.75, "currency": "USD"},
        }
        samples = scrape(client)
        assert value(samples, "acp_bridge_tokens_total", agent="mock", kind="input") == 110
        assert value(samples, "acp_bridge_tokens_total", agent="mock", kind="output") == 22
        assert value(samples, "acp_bridge_cost_usd_total", agent="mock") == 0.75
        # The totals are saved with the session: a restarted server lists them, and goes on adding.
        bridge.stop()
        bridge = start_bridge(tmp_path, data_dir=bridge.data_dir)
        client = bridge.client()
        assert info(client, "u1")["_meta"]["sandbox-agent/usage"] == totals
        send(client, "u1", "usage 1 1 0.25")
        evs = wait_for_events(client, "u1", until_type("turn.ended", 4))
        last = [e["data"]["metadata"] for e in evs if e["type"] == "turn.ended"][-1]
        # A new agent process counts its cost from 0 again: 0.25 is this turn's.
        assert last["cost"] == {"amount": 0.25, "currency": "USD"}
        assert info(client, "u1")["_meta"]["sandbox-agent/usage"]["cost"] == {"amount": 1.0, "currency": "USD"}
    finally:
        bridge.stop()


def test_a_snippet_edit_shows_a_diff_that_applies(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    bridge = start_bridge(tmp_path)
    try:
        client = bridge.client()
        create_session(client, "e1", directory=str(work))
        send(client, "e1", f"write notes.txt {TEN_LINES}")
        send(client, "e1", "edit notes.txt line 5 => line five")
        send(client, "e1", "edit notes.txt line 7 => line 2")  # then "line 2" is there twice
        evs = wait_for_events(client, "e1", until_type("turn.ended", 3))
        results = [
            e["data"]["item"]
            for e in evs
            if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "tool_result"
        ]
        refs = [p for item in results for p in item["content"] if p["type"] == "file_ref"]
        path = str(work / "notes.txt")
        written = TEN_LINES.rstrip("\n")  # the mock's message is trimmed
        assert applied(refs[0]["diff"], None, path) == written
        edit = refs[1]["diff"]
        assert "@@ -2,7 +2,7 @@" in edit and "No newline" not in edit.split("line five")[0], edit
        assert applied(edit, written, path) == written.replace("line 5", "line five")
        # The new text of the last edit is twice in the file: where it went cannot be told from the
        # snippets, so no diff rather than a wrong one.
        assert (work / "notes.txt").read_text().count("line 2\n") == 2
        assert refs[2] == {"type": "file_ref", "path": path, "action": "patch", "diff": None}
    finally:
        bridge.stop()
