"""A session's turns (``prompting``), what it shows and saves (``listing``), and a session another
bridge runs (``RemoteSession``), each alone: on a fake session (``session_fake.FakeSession``) whose
agent link answers ``session/prompt`` from a script, with no agent process."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from app.acp.process import ExitInfo
from app.acp.sdk import RequestError
from app.agents.registry import AgentSpec
from app.errors import AgentProcessExited, InvalidRequest, StreamError
from app.events.log import SessionEventLog
from app.events.store import MemoryEventStore
from app.metrics import Metrics
from app.sessions import listing, permission_requests, prompting
from app.sessions.agent_link import AgentLink
from app.sessions.phases import Phase
from app.sessions.recovery import Recovery
from app.sessions.remote import BRIDGE_META, RemoteSession
from app.sessions.saved import SavedSession
from tests.unit.session_fake import FakeSession
from tests.unit.test_session_requests import permission


class ScriptedLink(AgentLink):
    """An agent link that answers each request with the next of ``answers`` (raised when an error)."""

    def __init__(self, session: FakeSession, answers: list[Any]) -> None:
        super().__init__(session.id, session.spec, session.settings)
        self.answers = answers
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, asyncio.Future):
            return await answer
        return answer


def prompted(tmp_path: Path, *answers: Any) -> tuple[FakeSession, ScriptedLink]:
    session = FakeSession(tmp_path)
    session.agent = link = ScriptedLink(session, list(answers))
    session.turns = type(session.turns)(
        session.id, partial(prompting.begin_turn, session), partial(prompting.run_turn, session)
    )
    session.metrics = Metrics()
    return session, link


async def test_a_message_becomes_a_turn_that_the_answer_ends(tmp_path: Path) -> None:
    session, link = prompted(tmp_path, {"stopReason": "end_turn"}, RequestError(-32000, "overloaded"))
    turn_id = prompting.send_message(session, "hello", [])
    assert turn_id == "turn_1"
    assert session.types() == ["turn.started", "item.started", "item.completed"]  # before it returns
    await session.turns.wait_idle(5)
    assert session.types()[-1] == "turn.ended" and session.events()[-1][1]["metadata"]["stopReason"] == "end_turn"
    method, params = link.sent[0]
    assert method == "session/prompt" and params["sessionId"] == "native-1"
    assert params["prompt"][0] == {"type": "text", "text": "hello"}

    # An error answer: the error, then the turn's end.
    prompting.send_message(session, "again", [])
    await session.turns.wait_idle(5)
    assert session.types()[-2:] == ["error", "turn.ended"]
    assert session.events()[-1][1]["metadata"] == {"stopReason": "error"}
    assert session.metrics is not None
    assert session.metrics.turns_started == {"probe": 2}


async def test_an_answer_read_from_the_wire_ends_the_turn_there(tmp_path: Path) -> None:
    """In wire order, right after the updates read with it; the turn's task adds nothing after."""
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    session, _ = prompted(tmp_path, answer)
    prompting.send_message(session, "hello", [])
    await asyncio.sleep(0)
    session.turns.prompt_sent(41)
    response = {"jsonrpc": "2.0", "id": 41, "result": {"stopReason": "max_tokens"}}
    turn = session.turns.response_read(response)
    assert turn is not None
    prompting.prompt_answered(session, turn, response)
    assert session.types()[-1] == "turn.ended"
    answer.set_result(response["result"])
    await session.turns.wait_idle(5)
    assert session.types().count("turn.ended") == 1


async def test_a_message_waits_for_the_reply_the_turn_waits_for(tmp_path: Path) -> None:
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    session, _ = prompted(tmp_path, answer)
    prompting.send_message(session, "list the files", [])
    permission_requests.observe(session, permission(7))
    with pytest.raises(InvalidRequest, match="turn_1 is waiting for a reply to permission call_1"):
        prompting.send_message(session, "and now?", [])
    session.cancel_one(7)
    answer.set_result({"stopReason": "cancelled"})
    await session.turns.wait_idle(5)
    session.ended, session.end_reason = True, "terminated"
    with pytest.raises(InvalidRequest, match="session terminated"):
        prompting.send_message(session, "late", [])


async def test_a_turn_tells_what_it_used_and_the_session_adds_it_up(tmp_path: Path) -> None:
    """turn.ended says the turn's tokens, the metrics count them, SessionInfo and the saved record
    keep the totals, and a session restored from that record shows them again."""
    usage = {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120}
    session, _ = prompted(tmp_path, {"stopReason": "end_turn", "usage": usage})
    prompting.send_message(session, "hello", [])
    await session.turns.wait_idle(5)
    assert session.events()[-1][1]["metadata"] == {"stopReason": "end_turn", "usage": usage}
    assert session.metrics is not None
    assert session.metrics.tokens == {("probe", "input"): 100, ("probe", "output"): 20}
    totals = {"turns": 1, **usage}
    assert listing.info(session)["_meta"] == {"sandbox-agent/usage": totals}
    saved = SavedSession.read(listing.saved_record(session), lambda agent: AgentSpec(agent, None))
    assert saved.usage == totals
    again = FakeSession(tmp_path)
    again.state.totals.restore(saved.usage, saved.agent_cost)
    assert listing.info(again)["_meta"] == {"sandbox-agent/usage": totals}


def test_what_a_session_shows_and_saves(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    info = listing.info(session)
    assert info["sessionId"] == "s1" and info["nativeSessionId"] == "native-1" and not info["ended"]
    assert "_meta" not in info
    session.recovery = Recovery(cause="crash")
    session.runner = "http://a.example"
    meta = listing.info(session)["_meta"]
    assert meta == {
        "sandbox-agent/resume": {"state": "suspended", "cause": "crash"},
        BRIDGE_META: {"url": "http://a.example"},
    }
    record = listing.saved_record(session)
    saved = SavedSession.read(record, lambda agent: AgentSpec(agent, None))
    assert (saved.session_id, saved.config, saved.cwd, saved.created_at_ms) == (
        "s1",
        session.config,
        session.cwd,
        session.created_at_ms,
    )
    assert not saved.ended and record["recovery"]["cause"] == "crash"
    assert listing.started_metadata(session.config)["permissionMode"] == "default"


def remote(record: dict[str, Any]) -> RemoteSession:
    log = SessionEventLog("s1", MemoryEventStore())
    saved = SavedSession.read(record, lambda agent: AgentSpec(agent, None))
    return RemoteSession(saved, log, "http://a.example")


async def test_a_session_another_bridge_runs(tmp_path: Path) -> None:
    record = listing.saved_record(FakeSession(tmp_path))
    followed = remote(record)
    assert not followed.ended and followed.phase is Phase.SUSPENDED
    info = followed.info()
    assert info["sessionId"] == "s1" and info["_meta"][BRIDGE_META] == {"url": "http://a.example"}
    with pytest.raises(StreamError, match=r"run by the bridge at http://a\.example"):
        followed.check_accepting()
    with pytest.raises(StreamError):
        await followed.terminate()
    # Its runner saved it ended: refused as an ended session is, terminated quietly.
    followed.follow({**record, "endReason": "error", "exit": {"code": 2, "signal": None}}, "http://b.example")
    assert followed.ended and followed.phase is Phase.ENDED and followed.runner == "http://b.example"
    assert followed.exit_info == ExitInfo(2, None)
    with pytest.raises(AgentProcessExited):
        followed.check_accepting()
    await followed.terminate()
    followed.follow({**record, "endReason": "terminated"}, "http://b.example")
    with pytest.raises(InvalidRequest, match="session terminated"):
        followed.check_accepting()
    # It holds no request here: a reply is for an unknown id, as legacy answers one.
    with pytest.raises(InvalidRequest, match="unknown permission id: p1"):
        permission_requests.reply(followed, "p1", "once")
