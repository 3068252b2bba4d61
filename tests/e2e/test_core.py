"""Issue: core sessions, messages and events over real ACP agent processes (mock and probe agents)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import (
    PROBES,
    Bridge,
    create_session,
    events,
    iter_sse,
    pid_alive,
    send,
    start_bridge,
    types,
    until_type,
    wait_for_events,
    wait_until,
)

OK_PROMPT = "Reply with exactly the single word OK."
ENVELOPE_KEYS = [
    "event_id",
    "sequence",
    "time",
    "session_id",
    "native_session_id",
    "synthetic",
    "source",
    "type",
    "data",
    "raw",
]


@pytest.fixture(scope="module")
def probe_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    """A bridge with probe agents from an agents file."""
    tmp = tmp_path_factory.mktemp("probe-bridge")
    probe = PROBES / "probe_agent.py"
    agents = tmp / "agents.toml"
    modes = {
        "probe": "",
        "probe-init-exit": "exit_on_initialize",
        "probe-prompt-exit": "exit_after_prompt",
        "probe-stubborn": "stubborn",
        "probe-big": "big_line",
        "probe-garbage": "garbage",
        "probe-slow": "slow",
    }
    lines = []
    for name, mode in modes.items():
        lines += [
            f"[agents.{name}]",
            f'command = ["{sys.executable}", "{probe}"]',
            f'env = {{ PROBE_MODE = "{mode}", PROBE_PID_FILE = "{tmp / (name + ".pids")}" }}',
            "",
        ]
    agents.write_text("\n".join(lines))
    server = start_bridge(tmp, "--agents-file", str(agents))
    server.pid_dir = tmp  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_ok_prompt_gives_the_legacy_sequence(client: httpx.Client) -> None:
    created = create_session(client, "core-ok")
    assert created == {"healthy": True, "nativeSessionId": "mock-core-ok"}
    send(client, "core-ok", OK_PROMPT)
    evs = wait_for_events(client, "core-ok", until_type("turn.ended"))
    assert types(evs) == [
        "session.started",
        "turn.started",
        "item.started",
        "item.completed",
        "item.started",
        "item.delta",
        "item.completed",
        "turn.ended",
    ]
    for index, event in enumerate(evs, start=1):
        assert list(event) == ENVELOPE_KEYS
        assert event["sequence"] == index
        assert event["event_id"] == f"evt_{index}"
        assert event["session_id"] == "core-ok"
        assert event["native_session_id"] == "mock-core-ok"
        assert event["source"] == ("daemon" if event["synthetic"] else "agent")
        assert event["raw"] is None
        assert event["time"].endswith("Z") and event["time"][10] == "T"
    started = evs[0]["data"]["metadata"]
    assert started == {
        "agent": "mock",
        "agentMode": "build",
        "model": "mock",
        "permissionMode": "default",
        "variant": None,
    }
    user_started, user_done = evs[2]["data"]["item"], evs[3]["data"]["item"]
    assert user_started["role"] == "user" and user_started["status"] == "in_progress"
    assert user_done["content"] == [{"type": "text", "text": OK_PROMPT}]
    assert user_done["item_id"] == "itm_1"
    # The mock's user item as legacy §10.1 has it: the agent's, native id mock_<n>_user.
    assert user_started["native_item_id"] == user_done["native_item_id"] == "mock_1_user"
    assert [e["synthetic"] for e in evs[2:4]] == [False, False]
    assistant = evs[6]["data"]["item"]
    assert assistant["item_id"] == "itm_2"
    assert assistant["native_item_id"] == "mock_1_ok"
    assert assistant["role"] == "assistant" and assistant["kind"] == "message"
    assert assistant["content"] == [{"type": "text", "text": "OK"}]
    assert assistant["status"] == "completed"
    assert evs[4]["data"]["item"]["content"][0]["type"] == "text"
    assert evs[5]["data"] == {"item_id": "itm_2", "native_item_id": "mock_1_ok", "delta": "OK"}
    assert evs[7]["data"]["phase"] == "ended"
    assert evs[7]["data"]["metadata"]["stopReason"] == "end_turn"


def test_multi_turn_polling_by_offset_replays_nothing(client: httpx.Client) -> None:
    create_session(client, "core-multi")
    send(client, "core-multi", "Reply with exactly the word FIRST.")
    first = wait_for_events(client, "core-multi", until_type("turn.ended"))
    last = first[-1]["sequence"]
    send(client, "core-multi", "Reply with exactly the word SECOND.")
    second = wait_for_events(client, "core-multi", until_type("turn.ended"), offset=last)
    assert second[0]["sequence"] == last + 1
    assert second[0]["type"] == "turn.started"
    texts = [e["data"]["item"]["content"][0]["text"] for e in second if e["type"] == "item.completed"]
    assert texts == ["Reply with exactly the word SECOND.", "SECOND"]
    polled = events(client, "core-multi", offset=last, limit=200)
    assert [e["sequence"] for e in polled] == [e["sequence"] for e in second]


def test_two_sessions_messaged_at_once_keep_their_own_sequences(client: httpx.Client, bridge: Bridge) -> None:
    for sid in ("core-par-a", "core-par-b"):
        create_session(client, sid)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def go(sid: str) -> None:
        try:
            with bridge.client() as c:
                barrier.wait(5)
                send(c, sid, OK_PROMPT)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(sid,)) for sid in ("core-par-a", "core-par-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    for sid in ("core-par-a", "core-par-b"):
        evs = wait_for_events(client, sid, until_type("turn.ended"))
        assert [e["sequence"] for e in evs] == list(range(1, 9))
        assert all(e["session_id"] == sid for e in evs)
        assert evs[6]["data"]["item"]["native_item_id"] == "mock_1_ok"


def test_help_echo_and_markdown_commands(client: httpx.Client) -> None:
    create_session(client, "core-cmds")
    send(client, "core-cmds", "help")
    send(client, "core-cmds", "echo hello   there")
    send(client, "core-cmds", "say")
    send(client, "core-cmds", "markdown")
    send(client, "core-cmds", "  something else  ")
    evs = wait_for_events(client, "core-cmds", until_type("turn.ended", 5))
    done = [
        e["data"]["item"] for e in evs if e["type"] == "item.completed" and e["data"]["item"]["role"] == "assistant"
    ]
    assert [d["native_item_id"] for d in done] == [
        "mock_1_help",
        "mock_2_echo",
        "mock_3_echo",
        "mock_4_markdown",
        "mock_5_reply",
    ]
    assert done[0]["content"][0]["text"].startswith("Mock agent commands:\n- demo:")
    assert done[0]["content"][0]["text"].endswith("\n\nAny other text will be echoed as an assistant message.")
    assert done[1]["content"][0]["text"] == "hello there"
    assert done[2]["content"][0]["text"] == "Tell me what to say after `echo`."
    assert done[4]["content"][0]["text"] == "something else"
    markdown_item = done[3]["item_id"]
    deltas = [e["data"]["delta"] for e in evs if e["type"] == "item.delta" and e["data"]["item_id"] == markdown_item]
    assert len(deltas) == 8
    assert "".join(deltas) == done[3]["content"][0]["text"]


def test_include_raw_carries_the_acp_messages(client: httpx.Client) -> None:
    create_session(client, "core-raw")
    send(client, "core-raw", OK_PROMPT)
    wait_for_events(client, "core-raw", until_type("turn.ended"))
    for name in ("include_raw", "includeRaw"):
        evs = events(client, "core-raw", 0, **{name: "true"})
        delta = next(e for e in evs if e["type"] == "item.delta")
        assert delta["raw"]["method"] == "session/update"
        # The mock gives this reply whole (as legacy did), so its delta comes from that upsert.
        assert delta["raw"]["params"]["update"]["sessionUpdate"] == "agent_message"
        ended = evs[-1]
        assert ended["type"] == "turn.ended" and ended["raw"]["result"]["stopReason"] == "end_turn"
    assert all(e["raw"] is None for e in events(client, "core-raw"))


def test_events_paging_limit_and_has_more(client: httpx.Client) -> None:
    create_session(client, "core-page")
    send(client, "core-page", OK_PROMPT)
    wait_for_events(client, "core-page", until_type("turn.ended"))
    page = client.get("/v1/sessions/core-page/events", params={"offset": 2, "limit": 3}).json()
    assert [e["sequence"] for e in page["events"]] == [3, 4, 5] and page["hasMore"] is True
    page = client.get("/v1/sessions/core-page/events", params={"offset": 5, "limit": 3}).json()
    assert [e["sequence"] for e in page["events"]] == [6, 7, 8] and page["hasMore"] is False
    page = client.get("/v1/sessions/core-page/events", params={"limit": 0}).json()
    assert page == {"events": [], "hasMore": True}
    page = client.get("/v1/sessions/core-page/events", params={"offset": 8}).json()
    assert page == {"events": [], "hasMore": False}


def test_session_list_is_newest_first_with_every_key(client: httpx.Client) -> None:
    create_session(client, "core-list-1")
    create_session(client, "core-list-2", agentMode="plan", permissionMode="acceptEdits", title="T", variant="v")
    sessions = client.get("/v1/sessions").json()["sessions"]
    ids = [s["sessionId"] for s in sessions]
    assert ids.index("core-list-2") < ids.index("core-list-1")
    info = next(s for s in sessions if s["sessionId"] == "core-list-2")
    assert list(info) == [
        "sessionId",
        "agent",
        "agentMode",
        "permissionMode",
        "model",
        "variant",
        "nativeSessionId",
        "ended",
        "eventCount",
        "createdAt",
        "updatedAt",
        "directory",
        "title",
    ]
    assert info["agentMode"] == "plan"
    assert info["permissionMode"] == "default"  # acceptEdits is a no-op for mock
    assert info["model"] == "mock" and info["variant"] == "v" and info["title"] == "T"
    assert info["eventCount"] == 1 and info["ended"] is False


def test_session_id_with_encoded_slash(client: httpx.Client) -> None:
    response = client.post("/v1/sessions/test%2Fsession", json={"agent": "mock"})
    assert response.status_code == 200, response.text
    assert response.json()["nativeSessionId"] == "mock-test/session"
    assert client.post("/v1/sessions/test%2Fsession/messages", json={"message": OK_PROMPT}).status_code == 204
    evs = wait_for_events(client, "test%2Fsession", until_type("turn.ended"))
    assert evs[0]["session_id"] == "test/session"
    assert any(s["sessionId"] == "test/session" for s in client.get("/v1/sessions").json()["sessions"])


def test_terminate_ends_once_and_refuses_messages(client: httpx.Client) -> None:
    create_session(client, "core-term")
    send(client, "core-term", OK_PROMPT)
    wait_for_events(client, "core-term", until_type("turn.ended"))
    assert client.post("/v1/sessions/core-term/terminate").status_code == 204
    assert client.post("/v1/sessions/core-term/terminate").status_code == 204
    evs = events(client, "core-term")
    ended = [e for e in evs if e["type"] == "session.ended"]
    assert len(ended) == 1
    assert ended[0]["data"] == {"reason": "terminated", "terminated_by": "daemon"}
    assert ended[0]["synthetic"] is True
    response = client.post("/v1/sessions/core-term/messages", json={"message": "again"})
    assert response.status_code == 400
    assert response.json()["detail"] == "invalid request: session terminated"
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "core-term")
    assert info["ended"] is True and info["eventCount"] == len(evs)


def test_messages_stream_closes_after_turn_ended(client: httpx.Client) -> None:
    create_session(client, "core-stream")
    with client.stream("POST", "/v1/sessions/core-stream/messages/stream", json={"message": OK_PROMPT}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        got = list(iter_sse(r))  # ends only because the server closes the stream
    assert types(got).count("turn.started") == 1 and types(got).count("turn.ended") == 1
    assert got[-1]["type"] == "turn.ended"
    assert got[0]["type"] == "turn.started"  # no history replayed


def test_custom_agent_from_agents_file(probe_bridge: Bridge) -> None:
    with probe_bridge.client() as c:
        ids = [a["id"] for a in c.get("/v1/agents").json()["agents"]]
        assert ids[:5] == ["claude", "codex", "opencode", "amp", "mock"]
        assert "probe" in ids
        assert create_session(c, "p1", agent="probe") == {"healthy": True, "nativeSessionId": "probe-session-1"}
        send(c, "p1", "hello probe")
        evs = wait_for_events(c, "p1", until_type("turn.ended"))
        reply = [e for e in evs if e["type"] == "item.completed"][-1]["data"]["item"]
        assert reply["content"] == [{"type": "text", "text": "probe: hello probe"}]
        assert all(e["native_session_id"] == "probe-session-1" for e in evs)


def test_sixteen_mib_stdout_line(probe_bridge: Bridge) -> None:
    with probe_bridge.client(timeout=60) as c:
        create_session(c, "big", agent="probe-big")
        send(c, "big", "go")
        wait_for_events(c, "big", until_type("turn.ended"), timeout=60)
        done = [e for e in events(c, "big") if e["type"] == "item.completed"][-1]["data"]["item"]
        assert len(done["content"][0]["text"]) == 16 * 1024 * 1024


def test_non_json_stdout_line_is_reported_and_the_session_goes_on(probe_bridge: Bridge) -> None:
    with probe_bridge.client() as c:
        create_session(c, "garbage", agent="probe-garbage")
        send(c, "garbage", "hi")
        evs = wait_for_events(c, "garbage", until_type("turn.ended"), include_raw=True)
        unparsed = [e for e in evs if e["type"] == "agent.unparsed"]
        assert len(unparsed) == 1
        assert unparsed[0]["data"]["location"] == "agent.stdout"
        assert unparsed[0]["raw"] == "this is not json"
        assert evs[-1]["type"] == "turn.ended"


def test_agent_exiting_during_initialize_fails_create_quickly(probe_bridge: Bridge) -> None:
    with probe_bridge.client() as c:
        start = time.monotonic()
        response = c.post("/v1/sessions/init-exit", json={"agent": "probe-init-exit"})
        assert time.monotonic() - start < 5
        assert response.status_code == 500
        body = response.json()
        assert body["type"] == "urn:sandbox-agent:error:agent_process_exited"
        assert body["detail"] == "agent process exited: probe-init-exit"
        assert body["agent"] == "probe-init-exit"
        assert body["details"]["exitCode"] == 3
        assert "refusing to initialize" in body["details"]["stderr"]
        assert all(s["sessionId"] != "init-exit" for s in c.get("/v1/sessions").json()["sessions"])


def test_agent_exit_mid_session_records_error_and_ended(probe_bridge: Bridge) -> None:
    with probe_bridge.client() as c:
        create_session(c, "prompt-exit", agent="probe-prompt-exit")
        send(c, "prompt-exit", "die")
        evs = wait_for_events(c, "prompt-exit", until_type("session.ended"))
        error, ended = evs[-2], evs[-1]
        assert error["type"] == "error" and error["synthetic"] is True
        assert error["data"]["code"] == "process_exit"
        assert error["data"]["details"] is None
        data = ended["data"]
        assert data["reason"] == "error" and data["terminated_by"] == "agent"
        assert data["exit_code"] == 7
        assert data["stderr"]["truncated"] is True and data["stderr"]["total_lines"] == 30
        assert data["stderr"]["head"].splitlines()[0] == "probe stderr line 0"
        assert len(data["stderr"]["head"].splitlines()) == 20
        assert data["stderr"]["tail"].splitlines()[-1] == "probe stderr line 29"
        response = c.post("/v1/sessions/prompt-exit/messages", json={"message": "again"})
        assert response.status_code == 500
        assert response.json()["type"] == "urn:sandbox-agent:error:agent_process_exited"


def test_terminate_kills_a_stubborn_agent_and_its_children(probe_bridge: Bridge) -> None:
    pid_file = Path(probe_bridge.pid_dir) / "probe-stubborn.pids"  # type: ignore[attr-defined]
    with probe_bridge.client() as c:
        create_session(c, "stubborn", agent="probe-stubborn")
        assert wait_until(pid_file.exists, 5)
        pids = [int(p) for p in pid_file.read_text().split()]
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        start = time.monotonic()
        assert c.post("/v1/sessions/stubborn/terminate").status_code == 204
        assert wait_until(lambda: not any(pid_alive(p) for p in pids), 5 - (time.monotonic() - start))


def test_terminate_cancels_a_running_turn(probe_bridge: Bridge) -> None:
    with probe_bridge.client() as c:
        create_session(c, "slow", agent="probe-slow")
        send(c, "slow", "take your time")
        assert c.post("/v1/sessions/slow/terminate").status_code == 204
        evs = events(c, "slow")
        assert types(evs)[-2:] == ["turn.ended", "session.ended"]
        assert evs[-2]["data"]["metadata"]["stopReason"] == "cancelled"
