"""A session's permission and question requests, each part alone on a fake session
(``session_fake.FakeSession``): the books (``request_book``), ``permission_requests`` and
``question_requests``, from the agent's request to the person's reply, a timeout or a cancel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.acp.sdk import RequestError
from app.agents.profiles import PROFILES
from app.agents.registry import AgentSpec
from app.errors import AgentProcessExited, InvalidRequest
from app.sessions import permission_requests, question_requests
from tests.unit.session_fake import FakeSession

OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "always", "name": "Always", "kind": "allow_always"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def permission(request_id: Any, call_id: str = "call_1", kind: str = "execute") -> dict[str, Any]:
    tool_call = {"toolCallId": call_id, "title": "Run ls", "kind": kind, "rawInput": {"command": "ls"}}
    params = {"sessionId": "native-1", "toolCall": tool_call, "options": OPTIONS}
    return {"jsonrpc": "2.0", "id": request_id, "method": permission_requests.METHOD, "params": params}


def elicitation(request_id: Any, mode: str = "form") -> dict[str, Any]:
    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["Red", "Blue"]}}}
    params = {"mode": mode, "message": "Which colour?", "requestedSchema": schema, "toolCallId": "ask_1"}
    return {"jsonrpc": "2.0", "id": request_id, "method": question_requests.ELICITATION, "params": params}


async def ask_permission(session: FakeSession, message: dict[str, Any]) -> asyncio.Task[Any]:
    """The agent's request as the client services take it: observed in wire order, then handled."""
    permission_requests.observe(session, message)
    task = asyncio.create_task(permission_requests.handle(session, message["params"], message["id"]))
    await asyncio.sleep(0)
    return task


async def test_a_permission_is_asked_and_answered_once(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    task = await ask_permission(session, permission(7))
    (asked,) = [data for kind, data in session.events() if kind == "permission.requested"]
    assert asked["permission_id"] == "call_1" and asked["status"] == "requested"
    assert list(session.pending) == [7] and list(session.permissions.open) == ["call_1"]
    request = session.permissions.open["call_1"]
    assert request.shown_at == session.log.last_sequence  # its requested event

    permission_requests.reply(session, "call_1", "once")
    assert await task == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert session.types() == ["permission.requested", "permission.resolved"]
    assert session.events()[-1][1]["status"] == "accept"
    assert not session.pending and not session.permissions.open
    with pytest.raises(InvalidRequest, match="unknown permission id: call_1"):
        permission_requests.reply(session, "call_1", "once")  # answered already


async def test_always_is_remembered_for_the_same_request(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    first = await ask_permission(session, permission(1, "call_1"))
    permission_requests.reply(session, "call_1", "always")
    assert (await first)["outcome"]["optionId"] == "always"
    # The same command again: approved for the session, shown only as its resolved event.
    second = await ask_permission(session, permission(2, "call_2"))
    assert (await second)["outcome"]["optionId"] == "always"
    assert session.types() == ["permission.requested", "permission.resolved"] * 2


async def test_bypass_approves_unless_the_profile_says_the_agent_asks_anyway(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, permission_mode="bypass")
    assert (await (await ask_permission(session, permission(1))))["outcome"]["optionId"] == "yes"


async def test_a_timeout_rejects_and_a_cancel_resolves_as_reject(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, hitl_timeout=0.05)
    assert (await (await ask_permission(session, permission(1))))["outcome"]["optionId"] == "no"
    session = FakeSession(tmp_path)
    task = await ask_permission(session, permission(2))
    assert session.cancel_one(2) and not session.cancel_one(2)
    assert await task == {"outcome": {"outcome": "cancelled"}}
    kind, resolved = session.events()[-1]
    assert (kind, resolved["status"]) == ("permission.resolved", "reject")


async def test_a_request_of_an_ended_session_is_cancelled_and_a_late_reply_refused(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    task = await ask_permission(session, permission(1))
    session.ended, session.end_reason = True, "terminated"
    session.cancel_one(1)  # as the session's end does
    assert (await task)["outcome"] == {"outcome": "cancelled"}
    # Legacy order: the request is found (orphaned), then the ended session refuses.
    with pytest.raises(InvalidRequest, match="session terminated"):
        permission_requests.reply(session, "call_1", "once")
    with pytest.raises(InvalidRequest, match="unknown permission id"):
        permission_requests.reply(session, "call_1", "once")
    # Asked after the end: cancelled at once.
    later = await ask_permission(session, permission(2, "call_2"))
    assert (await later)["outcome"] == {"outcome": "cancelled"}


async def test_at_shutdown_a_cancel_records_nothing(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    task = await ask_permission(session, permission(1))
    session.shutting_down = True
    session.cancel_one(1)
    await task
    assert session.types() == ["permission.requested"]


async def test_ids_stay_unique_and_a_request_that_died_says_so(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    first = await ask_permission(session, permission(1, "call_1"))
    second = await ask_permission(session, permission(2, "call_1"))  # the same tool call id again
    assert list(session.permissions.open) == ["call_1", "call_1_2"]
    for task in (first, second):
        task.cancel()
    session.permissions.died["gone"] = "the agent that stopped"
    with pytest.raises(InvalidRequest, match="died with the agent that stopped"):
        session.permissions.lookup("gone")


async def test_a_permission_held_until_its_tool_call_is_announced(tmp_path: Path) -> None:
    """An agent whose profile says it announces each tool call before asking about it."""
    session = FakeSession(tmp_path, spec=AgentSpec("claude", None, profile=PROFILES["claude"]))
    task = await ask_permission(session, permission(1, "call_9"))
    assert session.types() == []  # held: its tool call has not been announced
    update = {"sessionUpdate": "tool_call", "toolCallId": "call_9", "title": "Bash", "kind": "execute"}
    permission_requests.remember_tool_calls(session, {"method": "session/update", "params": {"update": update}})
    await asyncio.sleep(0.01)
    assert session.types() == ["permission.requested"]
    permission_requests.reply(session, "call_9", "reject")
    assert (await task)["outcome"]["optionId"] == "no"


async def test_a_form_elicitation_is_answered_declined_or_refused(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    message = elicitation(3)
    question_requests.observe_elicitation(session, message)
    task = asyncio.create_task(question_requests.handle_elicitation(session, message["params"], 3))
    await asyncio.sleep(0)
    (asked,) = [data for kind, data in session.events() if kind == "question.requested"]
    assert (asked["question_id"], asked["prompt"], asked["options"]) == ("ask_1", "Which colour?", ["Red", "Blue"])
    question_requests.reply(session, "ask_1", [["Blue"]])
    assert await task == {"action": "accept", "content": {"colour": "Blue"}}
    assert session.events()[-1][1]["status"] == "answered"

    message = elicitation(4)
    question_requests.observe_elicitation(session, message)
    task = asyncio.create_task(question_requests.handle_elicitation(session, message["params"], 4))
    await asyncio.sleep(0)
    question_requests.reject(session, next(iter(session.questions.open)))
    assert await task == {"action": "decline"}

    # URL mode is not advertised: declined, and said.
    url = elicitation(5, mode="url")
    question_requests.observe_elicitation(session, url)
    assert await question_requests.handle_elicitation(session, url["params"], 5) == {"action": "decline"}
    assert session.types()[-1] == "agent.unparsed"


async def test_the_extension_question_and_its_cancel(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    params = {"prompt": "Go on?", "options": ["Yes", "No"], "questionId": "q_7"}
    message = {"jsonrpc": "2.0", "id": 8, "method": question_requests.EXTENSION, "params": params}
    question_requests.observe_extension(session, message)
    task = asyncio.create_task(question_requests.handle_extension(session, params, 8))
    await asyncio.sleep(0)
    session.cancel_one(8)
    assert await task == {"outcome": "cancelled"}
    assert session.events()[-1][1]["status"] == "rejected"
    with pytest.raises(RequestError):
        await question_requests.handle_extension(session, "not an object", 9)


async def test_an_ended_session_that_exited_refuses_with_its_exit(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    message = elicitation(3)
    question_requests.observe_elicitation(session, message)
    task = asyncio.create_task(question_requests.handle_elicitation(session, message["params"], 3))
    await asyncio.sleep(0)
    session.ended, session.end_reason = True, "error"
    with pytest.raises(AgentProcessExited):
        question_requests.reply(session, "ask_1", [["Red"]])
    assert await task == {"action": "cancel"}
