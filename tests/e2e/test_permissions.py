"""Permissions over ACP `session/request_permission`, through real agent processes (mock and probe)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.hitl_support import (
    ALL_KINDS,
    after_next_turn,
    assistant_texts,
    before_next_turn,
    hitl_bridge,
    in_process_manager,
    of_type,
    permission,
    probe_answers,
    probe_log,
    probe_pid,
    reply_permission,
    script,
    wait_count,
)
from tests.support import (
    Bridge,
    create_session,
    events,
    iter_sse,
    pid_alive,
    send,
    types,
    until_type,
    wait_for_events,
    wait_until,
    wait_until_async,
)

LIST_FILES = "List files in the current directory using available tools."
BASH = "Use the bash tool to run `ls` in the current directory. Do not answer without using the tool."
PERMISSION_KEYS = ["permission_id", "action", "status", "metadata"]


@pytest.fixture
def probe(hitl_probe: Bridge) -> Bridge:
    return hitl_probe


# ---- legacy checklist (mock agent) ----------------------------------------------------------------
OK_TURN = [
    "turn.started",
    "item.started",
    "item.completed",
    "item.started",
    "item.delta",
    "item.completed",
    "turn.ended",
]
LEGACY_METADATA = {"codexRequestKind": "commandExecution", "command": "ls"}


def test_permission_flow_in_plan_mode(client: httpx.Client) -> None:
    create_session(client, "perm-plan", permissionMode="plan")
    send(client, "perm-plan", LIST_FILES)
    evs = wait_count(client, "perm-plan", "permission.requested", include_raw=True)
    assert types(evs) == [
        "session.started",
        "turn.started",
        "item.started",
        "item.completed",
        "permission.requested",
    ]
    requested = evs[-1]
    assert requested["synthetic"] is False and requested["source"] == "agent"
    data = requested["data"]
    assert list(data) == PERMISSION_KEYS
    # Exactly the legacy event (behavior §5.7); ACP's tool call and options are in raw only.
    assert data == {
        "permission_id": "mock_1_permission",
        "action": "command_execution",
        "status": "requested",
        "metadata": LEGACY_METADATA,
    }
    assert requested["raw"]["params"]["toolCall"]["toolCallId"] == "mock_1_permission"
    assert [o["kind"] for o in requested["raw"]["params"]["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]

    response = reply_permission(client, "perm-plan", "missing-permission", "once")
    assert response.status_code == 400
    assert response.json() == {
        "type": "urn:sandbox-agent:error:invalid_request",
        "title": "Invalid Request",
        "status": 400,
        "detail": "invalid request: unknown permission id: missing-permission",
    }
    assert reply_permission(client, "perm-plan", "mock_1_permission", "once").status_code == 204
    again = reply_permission(client, "perm-plan", "mock_1_permission", "once")
    assert again.status_code == 400
    assert again.json()["detail"] == "invalid request: unknown permission id: mock_1_permission"

    # Legacy §10.3: the reply records the resolution and nothing more (no message, no turn.ended).
    evs = after_next_turn(client, "perm-plan", requested["sequence"])
    assert types(before_next_turn(evs)) == ["permission.resolved"]
    resolved = evs[0]
    assert resolved["synthetic"] is True and resolved["source"] == "daemon"
    assert resolved["data"] == {**data, "status": "accept"}
    assert assistant_texts(evs) == ["OK"]
    raw = of_type(events(client, "perm-plan", include_raw="true"), "permission.resolved")[0]["raw"]
    assert raw["result"] == {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


def test_reply_always_auto_approves_the_next_identical_request(client: httpx.Client) -> None:
    create_session(client, "perm-always", permissionMode="plan")
    send(client, "perm-always", LIST_FILES)
    first = wait_count(client, "perm-always", "permission.requested")
    assert reply_permission(client, "perm-always", "mock_1_permission", "always").status_code == 204
    resolved = wait_count(client, "perm-always", "permission.resolved", offset=first[-1]["sequence"])
    assert [r["data"]["status"] for r in resolved] == ["accept_for_session"]

    send(client, "perm-always", LIST_FILES)
    second = wait_count(client, "perm-always", "permission.resolved", offset=resolved[-1]["sequence"])
    assert types(second) == [
        "turn.started",
        "item.started",
        "item.completed",
        "permission.requested",
        "permission.resolved",
    ]
    requested, auto = second[3], second[4]
    assert requested["data"]["permission_id"] == "mock_2_permission"
    assert auto["synthetic"] is True
    assert auto["data"] == {**requested["data"], "status": "accept_for_session"}
    # Answered already: nothing to reply to.
    assert reply_permission(client, "perm-always", "mock_2_permission", "once").status_code == 400


def test_permission_command_asks_twice_and_replies_any_order(client: httpx.Client) -> None:
    create_session(client, "perm-two")
    send(client, "perm-two", "permission")
    evs = wait_count(client, "perm-two", "permission.requested", 2)
    assert [e["data"] for e in of_type(evs, "permission.requested")] == [
        {
            "permission_id": "mock_1_permission",
            "action": "command_execution",
            "status": "requested",
            "metadata": {"codexRequestKind": "commandExecution", "command": "echo mock"},
        },
        {
            "permission_id": "mock_1_permission_denied",
            "action": "file_change",
            "status": "requested",
            "metadata": {"codexRequestKind": "fileChange", "path": "mock_1/deny.txt"},
        },
    ]
    assert reply_permission(client, "perm-two", "mock_1_permission_denied", "reject").status_code == 204
    assert reply_permission(client, "perm-two", "mock_1_permission", "once").status_code == 204
    rest = before_next_turn(after_next_turn(client, "perm-two", evs[-1]["sequence"]))
    resolved = [(e["data"]["permission_id"], e["data"]["status"]) for e in rest]
    assert resolved == [("mock_1_permission_denied", "reject"), ("mock_1_permission", "accept")]
    assert types(rest) == ["permission.resolved"] * 2


@pytest.mark.parametrize("mode", ["default", "plan", "bypass", "acceptEdits"])
def test_the_mock_asks_in_every_permission_mode(client: httpx.Client, mode: str) -> None:
    """Legacy's mock asked in bypass too (bypass was the real agents' own business), and a message
    sent while its requests wait is taken at once: the mock's turn ended when it asked."""
    sid = f"perm-mode-{mode}"
    create_session(client, sid, permissionMode=mode)
    send(client, sid, LIST_FILES)
    evs = wait_count(client, sid, "permission.requested")
    assert types(evs)[-1] == "permission.requested"
    nxt = after_next_turn(client, sid, evs[-1]["sequence"])
    assert types(nxt) == OK_TURN
    assert assistant_texts(nxt) == ["OK"]
    assert reply_permission(client, sid, "mock_1_permission", "reject").status_code == 204
    resolved = wait_count(client, sid, "permission.resolved", offset=nxt[-1]["sequence"])
    assert [e["data"]["status"] for e in resolved] == ["reject"]


def test_messages_stream_closes_at_permission_requested(client: httpx.Client) -> None:
    create_session(client, "perm-stream", permissionMode="plan")
    with client.stream("POST", "/v1/sessions/perm-stream/messages/stream", json={"message": LIST_FILES}) as r:
        assert r.status_code == 200
        got = list(iter_sse(r))
    assert types(got) == ["turn.started", "item.started", "item.completed", "permission.requested"]
    assert reply_permission(client, "perm-stream", "mock_1_permission", "reject").status_code == 204
    rest = before_next_turn(after_next_turn(client, "perm-stream", got[-1]["sequence"]))
    assert types(rest) == ["permission.resolved"] and rest[0]["data"]["status"] == "reject"


def test_bash_prompt_asks_then_runs_the_tool_without_waiting(client: httpx.Client) -> None:
    """Legacy: the request, then the tool sequence at once, then turn.ended; the request stays
    pending after the turn."""
    create_session(client, "perm-bash", permissionMode="plan")
    send(client, "perm-bash", BASH)
    evs = wait_for_events(client, "perm-bash", until_type("turn.ended"))
    assert types(evs)[4] == "permission.requested"
    kinds = [e["data"]["item"]["kind"] for e in of_type(evs, "item.completed")]
    assert kinds == ["message", "tool_call", "tool_result"]
    assert reply_permission(client, "perm-bash", "mock_1_permission", "once").status_code == 204
    resolved = wait_count(client, "perm-bash", "permission.resolved", offset=evs[-1]["sequence"])
    assert resolved[0]["data"]["status"] == "accept"


def test_reply_errors_in_legacy_order(client: httpx.Client) -> None:
    missing = reply_permission(client, "no-such-session", "p1", "once")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "session not found: no-such-session"
    create_session(client, "perm-errors")
    bad = client.post("/v1/sessions/perm-errors/permissions/p1/reply", json={"reply": "maybe"})
    assert bad.status_code == 422
    bad = client.post("/v1/sessions/perm-errors/permissions/p1/reply", json={"reply": "ONCE"})
    assert bad.status_code == 422
    plain = client.post("/v1/sessions/perm-errors/permissions/p1/reply", content=b'{"reply":"once"}')
    assert plain.status_code == 415
    assert reply_permission(client, "perm-errors", "p1", "reject").status_code == 400


# ---- ACP specifics (probe agent) ----------------------------------------------------------------
def test_options_are_chosen_by_kind_and_replies_come_in_any_order(probe: Bridge) -> None:
    """Option ids that say the opposite of their kinds; three requests pending at once."""
    tricky = [
        {"optionId": "allow_once", "name": "No", "kind": "reject_once"},
        {"optionId": "reject_once", "name": "Yes", "kind": "allow_once"},
        {"optionId": "☃", "name": "Always", "kind": "allow_always"},
        {"optionId": "", "name": "Never", "kind": "reject_always"},
    ]
    requests = [
        permission("tc-dup", options=tricky, rawInput={"command": "echo 1"}, title="echo 1"),
        permission("tc-dup", options=tricky, rawInput={"command": "echo 2"}, title="echo 2"),
        permission(
            "tc-3",
            options=tricky,
            kind="edit",
            meta={"sandbox-agent/permissionId": "my-perm"},
            rawInput={"file_path": "/tmp/x.txt"},
        ),
    ]
    with probe.client() as c:
        create_session(c, "tricky", agent="hitl")
        send(c, "tricky", script(requests=requests))
        evs = wait_count(c, "tricky", "permission.requested", 3)
        ids = [e["data"]["permission_id"] for e in of_type(evs, "permission.requested")]
        assert ids == ["tc-dup", "tc-dup_2", "my-perm"]
        metadata = [e["data"]["metadata"] for e in of_type(evs, "permission.requested")]
        assert [m.get("command") for m in metadata] == ["echo 1", "echo 2", None]
        assert metadata[2]["path"] == "/tmp/x.txt"
        assert [e["data"]["action"] for e in of_type(evs, "permission.requested")] == ["execute", "execute", "edit"]
        for pid, reply in (("my-perm", "reject"), ("tc-dup", "once"), ("tc-dup_2", "always")):
            assert reply_permission(c, "tricky", pid, reply).status_code == 204
        answers = probe_answers(probe, "tricky", 3)
        assert answers == [
            {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
            {"outcome": {"outcome": "selected", "optionId": "☃"}},
            {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        ]
        evs = wait_for_events(c, "tricky", until_type("turn.ended"))
        resolved = [(e["data"]["permission_id"], e["data"]["status"]) for e in of_type(evs, "permission.resolved")]
        assert resolved == [("my-perm", "reject"), ("tc-dup", "accept"), ("tc-dup_2", "accept_for_session")]


def test_a_message_while_the_turn_waits_for_a_person_is_refused(probe: Bridge) -> None:
    """Each turn's events stay together: a message is refused, saying why, while the running turn
    waits for a reply, and taken again once it is answered."""
    with probe.client() as c:
        create_session(c, "busy", agent="hitl")
        send(c, "busy", script(requests=[permission("tc-busy", rawInput={"command": "ls"})]))
        evs = wait_count(c, "busy", "permission.requested")
        refused = c.post("/v1/sessions/busy/messages", json={"message": "hello"})
        assert refused.status_code == 400
        assert refused.json()["detail"] == (
            "invalid request: turn_1 is waiting for a reply to permission tc-busy; answer it, then send the message"
        )
        with c.stream("POST", "/v1/sessions/busy/messages/stream", json={"message": "hello"}) as r:
            assert r.status_code == 400
        assert events(c, "busy", offset=evs[-1]["sequence"]) == []
        assert reply_permission(c, "busy", "tc-busy", "once").status_code == 204
        done = wait_for_events(c, "busy", until_type("turn.ended"), offset=evs[-1]["sequence"])
        send(c, "busy", script())
        rest = wait_for_events(c, "busy", until_type("turn.ended"), offset=done[-1]["sequence"])
        assert types(rest)[0] == "turn.started" and rest[0]["data"]["turn_id"] == "turn_2"


def test_missing_kinds_fall_back(probe: Bridge) -> None:
    only_always = [
        {"optionId": "a", "name": "Always", "kind": "allow_always"},
        {"optionId": "r", "name": "Never", "kind": "reject_always"},
    ]
    only_allow = [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]
    requests = [
        permission("f1", options=only_always),
        permission("f2", options=only_always),
        permission("f3", options=only_allow),
    ]
    with probe.client() as c:
        create_session(c, "fallback", agent="hitl")
        send(c, "fallback", script(requests=requests))
        wait_count(c, "fallback", "permission.requested", 3)
        for pid, reply in (("f1", "once"), ("f2", "reject"), ("f3", "reject")):
            assert reply_permission(c, "fallback", pid, reply).status_code == 204
        assert probe_answers(probe, "fallback", 3) == [
            {"outcome": {"outcome": "selected", "optionId": "a"}},
            {"outcome": {"outcome": "selected", "optionId": "r"}},
            {"outcome": {"outcome": "cancelled"}},
        ]
        evs = wait_for_events(c, "fallback", until_type("turn.ended"))
        assert [e["data"]["status"] for e in of_type(evs, "permission.resolved")] == ["accept", "reject", "reject"]


def test_announced_tool_call_gives_a_stable_action_for_always(probe: Bridge) -> None:
    """The request repeats only the tool call id; the earlier tool_call names the tool."""

    def announced(call_id: str, tool: str, kind: str) -> dict[str, object]:
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": tool,
            "kind": kind,
            "status": "pending",
            "rawInput": {"command": "ls -la"},
            "_meta": {"claudeCode": {"toolName": tool}},
        }

    def bare(call_id: str) -> dict[str, object]:
        return permission(call_id, kind=None, title=f"run {call_id}", rawInput={"command": "ls -la"})

    with probe.client() as c:
        create_session(c, "remember", agent="hitl")
        send(c, "remember", script(updates=[announced("b1", "Bash", "execute")], requests=[bare("b1")]))
        evs = wait_count(c, "remember", "permission.requested")
        data = of_type(evs, "permission.requested")[0]["data"]
        assert data["action"] == "Bash"
        assert data["metadata"]["toolName"] == "Bash" and data["metadata"]["command"] == "ls -la"
        assert reply_permission(c, "remember", "b1", "always").status_code == 204
        first = wait_for_events(c, "remember", until_type("turn.ended"))

        turn = script(
            updates=[announced("b2", "Bash", "execute"), announced("w1", "Write", "edit")],
            requests=[bare("b2"), bare("w1")],
        )
        send(c, "remember", turn)
        evs = wait_count(c, "remember", "permission.requested", 2, offset=first[-1]["sequence"])
        resolved = of_type(evs, "permission.resolved")
        assert [(e["data"]["permission_id"], e["data"]["status"]) for e in resolved] == [("b2", "accept_for_session")]
        assert reply_permission(c, "remember", "w1", "once").status_code == 204
        wait_for_events(c, "remember", until_type("turn.ended"), offset=first[-1]["sequence"])
        assert probe_answers(probe, "remember", 3)[1:] == [
            {"outcome": {"outcome": "selected", "optionId": "always"}},
            {"outcome": {"outcome": "selected", "optionId": "allow"}},
        ]


def test_accept_edits_approves_file_changes_only(probe: Bridge) -> None:
    requests = [permission("edit-1", kind="edit", rawInput={"file_path": "/tmp/a"}), permission("run-1")]
    with probe.client() as c:
        create_session(c, "edits", agent="hitl", permissionMode="acceptEdits")
        send(c, "edits", script(requests=requests))
        evs = wait_count(c, "edits", "permission.requested")
        assert [e["data"]["permission_id"] for e in of_type(evs, "permission.requested")] == ["run-1"]
        edit = of_type(evs, "permission.resolved")
        assert [(e["data"]["permission_id"], e["data"]["status"]) for e in edit] == [("edit-1", "accept_for_session")]
        assert reply_permission(c, "edits", "run-1", "reject").status_code == 204
        assert probe_answers(probe, "edits", 2) == [
            {"outcome": {"outcome": "selected", "optionId": "always"}},
            {"outcome": {"outcome": "selected", "optionId": "reject"}},
        ]


def test_cancel_request_from_the_agent_resolves_that_request_only(probe: Bridge) -> None:
    with probe.client() as c:
        create_session(c, "withdraw", agent="hitl")
        send(c, "withdraw", script(requests=[permission("w-1"), permission("w-2")], cancel=[0]))
        evs = wait_count(c, "withdraw", "permission.resolved")
        resolved = of_type(evs, "permission.resolved")[0]["data"]
        assert (resolved["permission_id"], resolved["status"]) == ("w-1", "reject")
        assert not any(e["type"] == "agent.unparsed" for e in evs)
        assert reply_permission(c, "withdraw", "w-1", "once").status_code == 400
        assert reply_permission(c, "withdraw", "w-2", "once").status_code == 204
        assert probe_answers(probe, "withdraw", 2) == [
            {"outcome": {"outcome": "cancelled"}},
            {"outcome": {"outcome": "selected", "optionId": "allow"}},
        ]
        wait_for_events(c, "withdraw", until_type("turn.ended"))


def test_terminate_during_pending_permissions(probe: Bridge) -> None:
    with probe.client() as c:
        create_session(c, "term-perm", agent="hitl")
        pid = probe_pid(probe, "term-perm")
        send(c, "term-perm", script(requests=[permission("t-1"), permission("t-2")]))
        wait_count(c, "term-perm", "permission.requested", 2)
        assert c.post("/v1/sessions/term-perm/terminate").status_code == 204
        # The agent's side: every pending request was answered `cancelled` after session/cancel.
        assert probe_answers(probe, "term-perm", 2) == [{"outcome": {"outcome": "cancelled"}}] * 2
        received = [e for e in probe_log(probe, "term-perm") if "received" in e or "answer" in e]
        assert received[0] == {"received": "session/cancel"}
        assert wait_until(lambda: not pid_alive(pid), 5)
        evs = events(c, "term-perm")
        kinds = types(evs)
        assert kinds[-1] == "session.ended" and kinds.count("session.ended") == 1
        resolved = [i for i, e in enumerate(evs) if e["type"] == "permission.resolved"]
        assert [evs[i]["data"]["status"] for i in resolved] == ["reject", "reject"]
        turn_ended = kinds.index("turn.ended")
        assert max(resolved) < turn_ended < len(evs) - 1
        assert evs[turn_ended]["data"]["metadata"]["stopReason"] == "cancelled"
        # Legacy §4.3: a known id on an ended session is "session terminated" once, then unknown.
        late = reply_permission(c, "term-perm", "t-1", "once")
        assert late.status_code == 400 and late.json()["detail"] == "invalid request: session terminated"
        assert reply_permission(c, "term-perm", "t-1", "once").json()["detail"] == (
            "invalid request: unknown permission id: t-1"
        )
        assert reply_permission(c, "term-perm", "zzz", "once").json()["detail"] == (
            "invalid request: unknown permission id: zzz"
        )


def test_agent_exit_resolves_pending_permissions(probe: Bridge) -> None:
    with probe.client() as c:
        create_session(c, "exit-perm", agent="hitl")
        send(c, "exit-perm", script(requests=[permission("x-1")], exit=5))
        evs = wait_for_events(c, "exit-perm", until_type("session.ended"))
        assert types(evs)[-4:] == ["permission.requested", "permission.resolved", "error", "session.ended"]
        assert evs[-3]["data"]["status"] == "reject"
        late = reply_permission(c, "exit-perm", "x-1", "once")
        assert late.status_code == 500
        assert late.json()["type"] == "urn:sandbox-agent:error:agent_process_exited"


def test_timeout_denies_unanswered_requests(tmp_path: Path) -> None:
    question = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Still there?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    for bridge in hitl_bridge(tmp_path, env={"ACP_BRIDGE_HITL_TIMEOUT": "0.3"}):
        with bridge.client() as c:
            create_session(c, "slowpoke", agent="hitl")
            send(c, "slowpoke", script(requests=[permission("late-1", options=ALL_KINDS[::-1]), question]))
            evs = wait_for_events(c, "slowpoke", until_type("turn.ended"))
            assert [e["data"]["status"] for e in of_type(evs, "permission.resolved")] == ["reject"]
            assert [e["data"]["status"] for e in of_type(evs, "question.resolved")] == ["rejected"]
            assert probe_answers(bridge, "slowpoke", 2) == [
                {"outcome": {"outcome": "selected", "optionId": "reject"}},
                {"action": "decline"},
            ]
            assert reply_permission(c, "slowpoke", "late-1", "once").status_code == 400


# ---- in process: nothing leaks ---------------------------------------------------------------------
async def test_terminate_with_pending_requests_leaks_no_task_or_process(tmp_path: Path) -> None:
    manager = in_process_manager(tmp_path)
    baseline = asyncio.all_tasks()
    session = await manager.create("leak", {"agent": "hitl"})
    question = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Go?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    with session.log.subscribe(0) as sub:
        session.send_message(script(requests=[permission("l-1"), permission("l-2"), question]), [])
        waiting = 0
        while waiting < 3:
            event = await sub.next(timeout=10)
            assert event is not None, "no HITL request arrived"
            waiting += event.type in ("permission.requested", "question.requested")
    assert len(session.pending) == 3
    assert session.process is not None
    pid = session.process.pid
    await session.terminate()
    assert session.pending == {}
    assert session.permissions.open == {} and session.questions.open == {}

    settled = await wait_until_async(lambda: not (asyncio.all_tasks() - baseline - {asyncio.current_task()}), 5)
    assert settled, asyncio.all_tasks() - baseline
    assert not pid_alive(pid)
    answers = [json.loads(line) for line in (tmp_path / "probe-out" / "leak.jsonl").read_text().splitlines()]
    assert [a["answer"] for a in answers if "answer" in a] == [
        {"outcome": {"outcome": "cancelled"}},
        {"outcome": {"outcome": "cancelled"}},
        {"action": "cancel"},
    ]
    await manager.shutdown()


async def test_server_shutdown_cancels_pending_requests_and_records_nothing(tmp_path: Path) -> None:
    manager = in_process_manager(tmp_path)
    session = await manager.create("shut", {"agent": "hitl"})
    with session.log.subscribe(0) as sub:
        session.send_message(script(requests=[permission("s-1")]), [])
        while (event := await sub.next(timeout=10)) is not None and event.type != "permission.requested":
            pass
        assert event is not None
    assert session.process is not None
    pid, count = session.process.pid, session.log.count
    request = session.permissions.open["s-1"]
    await manager.shutdown()
    assert session.pending == {} and session.log.count == count
    assert request.future.result() == {"outcome": {"outcome": "cancelled"}}
    assert not pid_alive(pid)
