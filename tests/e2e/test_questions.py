"""Questions over ACP elicitation (form mode) and the legacy-shaped extension request, through real
agent processes (mock and probe)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.hitl_support import (
    after_next_turn,
    before_next_turn,
    of_type,
    probe_answers,
    probe_log,
    probe_pid,
    reject_question,
    reply_question,
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
)

QUESTION_KEYS = ["question_id", "prompt", "options", "response", "status"]
ASK_PROMPTS = (
    "Use the AskUserQuestion tool to ask exactly one yes/no question, then wait for a reply. Do not answer yourself.",
    "Call the AskUserQuestion tool with exactly one yes/no question and wait for a reply. Do not answer yourself.",
)


@pytest.fixture
def probe(hitl_probe: Bridge) -> Bridge:
    return hitl_probe


def elicitation(message: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema, **extra},
    }


# ---- legacy checklist (mock agent) ----------------------------------------------------------------
def test_question_command_reply_and_reject(client: httpx.Client) -> None:
    create_session(client, "q-two", agentMode="plan", permissionMode="plan")
    send(client, "q-two", "question")
    evs = wait_count(client, "q-two", "question.requested", 2)
    requested = [e["data"] for e in of_type(evs, "question.requested")]
    assert all(list(q) == QUESTION_KEYS for q in requested)
    assert requested == [
        {
            "question_id": "mock_1_question",
            "prompt": "Choose a color",
            "options": ["Red", "Blue"],
            "response": None,
            "status": "requested",
        },
        {
            "question_id": "mock_1_question_reject",
            "prompt": "Allow mock experiment?",
            "options": ["Yes", "No"],
            "response": None,
            "status": "requested",
        },
    ]
    assert all(e["synthetic"] is False for e in of_type(evs, "question.requested"))
    assert "turn.ended" not in types(evs)  # legacy: a script that ends asking records none
    assert reject_question(client, "q-two", "mock_1_question_reject").status_code == 204
    assert reply_question(client, "q-two", "mock_1_question", [["Red"]]).status_code == 204
    # Legacy §10.3: the replies record the resolutions and nothing more.
    resolved = before_next_turn(after_next_turn(client, "q-two", evs[-1]["sequence"]))
    assert types(resolved) == ["question.resolved"] * 2
    assert all(e["synthetic"] is True and e["source"] == "daemon" for e in resolved)
    assert [e["data"] for e in resolved] == [
        {**requested[1], "status": "rejected"},
        {**requested[0], "response": "Red", "status": "answered"},
    ]
    raws = [e["raw"]["result"] for e in of_type(events(client, "q-two", include_raw="true"), "question.resolved")]
    assert raws == [{"action": "decline"}, {"action": "accept", "content": {"answer": "red"}}]


@pytest.mark.parametrize("prompt", ASK_PROMPTS)
def test_ask_user_question_prompts(client: httpx.Client, prompt: str) -> None:
    sid = f"q-ask-{ASK_PROMPTS.index(prompt)}"
    create_session(client, sid)
    with client.stream("POST", f"/v1/sessions/{sid}/messages/stream", json={"message": prompt}) as r:
        got = list(iter_sse(r))  # closes at question.requested
    assert got[-1]["type"] == "question.requested"
    assert got[-1]["data"] == {
        "question_id": "mock_1_question",
        "prompt": "Proceed?",
        "options": ["Yes", "No"],
        "response": None,
        "status": "requested",
    }
    assert reply_question(client, sid, "mock_1_question", [["Yes"]]).status_code == 204
    evs = before_next_turn(after_next_turn(client, sid, got[-1]["sequence"]))
    assert types(evs) == ["question.resolved"]
    assert evs[0]["data"]["response"] == "Yes" and evs[0]["data"]["status"] == "answered"


def test_unknown_question_ids(client: httpx.Client) -> None:
    create_session(client, "q-unknown")
    expected = {
        "type": "urn:sandbox-agent:error:invalid_request",
        "title": "Invalid Request",
        "status": 400,
        "detail": "invalid request: unknown question id: missing-question",
    }
    response = reply_question(client, "q-unknown", "missing-question", [["x"]])
    assert response.status_code == 400 and response.json() == expected
    response = reject_question(client, "q-unknown", "missing-question")
    assert response.status_code == 400 and response.json() == expected
    assert reply_question(client, "nope-session", "q", []).status_code == 404
    assert reject_question(client, "nope-session", "q").status_code == 404
    bad = client.post("/v1/sessions/q-unknown/questions/q/reply", json={"answers": "Red"})
    assert bad.status_code == 422


def test_the_requested_schema_is_in_raw(client: httpx.Client) -> None:
    create_session(client, "q-raw")
    send(client, "q-raw", ASK_PROMPTS[0])
    evs = wait_count(client, "q-raw", "question.requested", include_raw=True)
    raw = evs[-1]["raw"]
    assert raw["method"] == "elicitation/create"
    assert raw["params"]["requestedSchema"]["properties"]["answer"]["enum"] == ["Yes", "No"]
    assert reject_question(client, "q-raw", "mock_1_question").status_code == 204
    wait_count(client, "q-raw", "question.resolved")
    resolved = of_type(events(client, "q-raw", include_raw="true"), "question.resolved")[0]
    assert resolved["raw"]["result"] == {"action": "decline"}


# ---- ACP specifics (probe agent) ----------------------------------------------------------------
def test_capabilities_advertise_form_elicitation_only(probe: Bridge) -> None:
    with probe.client() as c:
        create_session(c, "q-caps", agent="hitl")
        caps = probe_log(probe, "q-caps")[0]["initialize"]
        assert caps["elicitation"] == {"form": {}}
        assert caps["_meta"]["sandbox-agent/requestQuestion"] == {}


def test_form_content_is_built_from_the_schema(probe: Bridge) -> None:
    properties = {
        "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "count": {"type": "integer", "title": "How many?"},
        "agree": {"type": "boolean"},
        "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "Bee"}]}},
        "note": {"type": "string", "default": "none"},
    }
    question = elicitation("Fill the form", properties, toolCallId="call-form")
    with probe.client() as c:
        create_session(c, "q-form", agent="hitl")
        send(c, "q-form", script(requests=[question]))
        evs = wait_count(c, "q-form", "question.requested")
        data = of_type(evs, "question.requested")[0]["data"]
        assert data == {
            "question_id": "call-form",
            "prompt": "Fill the form",
            "options": ["Red", "Green"],
            "response": None,
            "status": "requested",
        }
        answers = [["Green"], ["3"], ["yes"], ["a", "Bee"]]
        assert reply_question(c, "q-form", "call-form", answers).status_code == 204
        content = {"color": "g", "count": 3, "agree": True, "tags": ["a", "b"], "note": "none"}
        assert probe_answers(probe, "q-form", 1) == [{"action": "accept", "content": content}]
        evs = wait_for_events(c, "q-form", until_type("turn.ended"))
        assert of_type(evs, "question.resolved")[0]["data"]["response"] == "Green"


def test_extension_question_request(probe: Bridge) -> None:
    ext = "_sandbox-agent/session/request_question"
    yes_no = [{"label": "Yes"}, {"label": "No"}]
    requests = [
        {"method": ext, "params": {"questionId": "ext-1", "prompt": "Pick one", "options": ["A", "B"]}},
        {"method": ext, "params": {"questions": [{"question": "Sure?", "options": yes_no}]}},
    ]
    with probe.client() as c:
        create_session(c, "q-ext", agent="hitl")
        send(c, "q-ext", script(requests=requests))
        evs = wait_count(c, "q-ext", "question.requested", 2)
        requested = [e["data"] for e in of_type(evs, "question.requested")]
        assert [(q["question_id"], q["prompt"], q["options"]) for q in requested] == [
            ("ext-1", "Pick one", ["A", "B"]),
            ("question_2", "Sure?", ["Yes", "No"]),
        ]
        assert reject_question(c, "q-ext", "question_2").status_code == 204
        assert reply_question(c, "q-ext", "ext-1", [["B"]]).status_code == 204
        assert probe_answers(probe, "q-ext", 2) == [
            {"outcome": "answered", "answers": [["B"]]},
            {"outcome": "rejected"},
        ]


def test_url_mode_is_declined_and_reported(probe: Bridge) -> None:
    url = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Log in", "url": "https://example.invalid/", "elicitationId": "e1"},
    }
    with probe.client() as c:
        create_session(c, "q-url", agent="hitl")
        send(c, "q-url", script(requests=[url]))
        assert probe_answers(probe, "q-url", 1) == [{"action": "decline"}]
        evs = wait_for_events(c, "q-url", until_type("turn.ended"))
        unparsed = of_type(evs, "agent.unparsed")
        assert len(unparsed) == 1 and "not supported" in unparsed[0]["data"]["error"]
        assert not of_type(evs, "question.requested")


def test_terminate_during_a_pending_question(probe: Bridge) -> None:
    with probe.client() as c:
        create_session(c, "q-term", agent="hitl")
        pid = probe_pid(probe, "q-term")
        send(c, "q-term", script(requests=[elicitation("Wait?", {"ok": {"type": "boolean"}})]))
        wait_count(c, "q-term", "question.requested")
        assert c.post("/v1/sessions/q-term/terminate").status_code == 204
        assert probe_answers(probe, "q-term", 1) == [{"action": "cancel"}]
        assert wait_until(lambda: not pid_alive(pid), 5)
        evs = events(c, "q-term")
        assert types(evs)[-1] == "session.ended"
        resolved = of_type(evs, "question.resolved")
        assert [(e["data"]["question_id"], e["data"]["status"], e["data"]["response"]) for e in resolved] == [
            ("question_1", "rejected", None)
        ]
        late = reply_question(c, "q-term", "question_1", [["Yes"]])
        assert late.status_code == 400 and late.json()["detail"] == "invalid request: session terminated"
        assert reject_question(c, "q-term", "question_1").json()["detail"] == (
            "invalid request: unknown question id: question_1"
        )
