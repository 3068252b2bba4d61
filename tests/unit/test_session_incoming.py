"""What a session does with its agent's messages (``incoming``) and what an ended session keeps
(``ended``), each alone on a fake session (``session_fake.FakeSession``), no agent process; and a
session restored ended from its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.acp.process import ExitInfo
from app.agents.profiles import PROFILES
from app.agents.registry import AgentRegistry, AgentSpec
from app.errors import InvalidRequest
from app.events.store import MemoryEventStore
from app.sessions import ended, incoming, listing, permission_requests
from app.sessions.client_services import ClientServices
from app.sessions.manager import SessionManager
from app.sessions.phases import Phase
from app.sessions.session import Session
from app.settings import Settings
from tests.unit.session_fake import FakeSession
from tests.unit.test_session_requests import ask_permission, permission

TEN_LINES = "".join(f"line {i}\n" for i in range(1, 11))


def snippet_edit(path: Path) -> dict[str, Any]:
    """A finished edit whose ACP diff has only the changed strings (as claude sends them)."""
    diff = {"type": "diff", "path": str(path), "oldText": "line 5", "newText": "line five"}
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "edit_1",
        "title": "Edit notes.txt",
        "kind": "edit",
        "status": "completed",
        "content": [diff],
        "locations": [{"path": str(path)}],
    }
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "native-1", "update": update}}


def file_refs(session: FakeSession) -> list[dict[str, Any]]:
    return [
        part
        for kind, data in session.events()
        if kind == "item.completed"
        for part in data["item"]["content"]
        if part["type"] == "file_ref"
    ]


async def test_an_update_whose_diff_needs_its_file_is_recorded_once_the_file_is_read(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(TEN_LINES.replace("line 5", "line five"))  # the agent has changed it already
    session = FakeSession(tmp_path)
    pending = incoming.on_incoming(session, snippet_edit(notes))
    assert pending is not None and session.types() == []  # the agent's next message waits for it
    await pending
    (ref,) = file_refs(session)
    assert "-line 5\n+line five\n" in ref["diff"], ref
    # Not the diff of the file as it is now: the read text is what the edit made of it.
    assert ref["path"] == str(notes) and ref["action"] == "patch"


async def test_an_update_read_while_the_session_ends_feeds_no_shared_part(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(TEN_LINES)
    session = FakeSession(tmp_path)
    pending = incoming.on_incoming(session, snippet_edit(notes))
    assert pending is not None
    session.ended = True
    ended.shed(session)  # while the file is read
    await pending
    assert session.types() == []
    assert not ended.shared_parts().translator.tools.calls


async def test_a_vendor_notification_that_is_a_session_update(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, spec=AgentSpec("qwen", None, profile=PROFILES["qwen"]))
    method = "qwen/notify/session/mode-update"
    assert incoming.on_incoming(session, {"jsonrpc": "2.0", "method": method, "params": {"modeId": "plan"}}) is None
    assert session.state.mode == "plan"
    incoming.on_incoming(session, {"jsonrpc": "2.0", "method": "vendor/unknown", "params": {}})
    incoming.on_incoming(session, {"jsonrpc": "2.0", "method": "_vendor/unknown", "params": {}})  # ignored (ACP)
    assert session.types() == ["agent.unparsed"]


async def test_a_replayed_history_is_counted_not_recorded_until_the_next_prompt(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    session.replaying = True
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "earlier"}}
    incoming.on_incoming(session, {"jsonrpc": "2.0", "method": "session/update", "params": {"update": chunk}})
    assert session.replayed == 1 and session.types() == []
    incoming.on_outgoing(session, {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}})
    assert not session.replaying
    incoming.on_unparsed_line(session, b"\xffnot json", "not JSON")
    assert session.types() == ["agent.unparsed"]


async def test_an_ended_session_sheds_what_ran_it(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    session.state.available_commands = [{"name": "init"}]
    session.state.totals.restore({"turns": 1, "inputTokens": 5}, None)
    idle_questions = session.questions
    task = await ask_permission(session, permission(7))
    session.ended, session.end_reason = True, "terminated"
    session.cancel_pending()  # what an end does first: the request is orphaned
    assert await task == {"outcome": {"outcome": "cancelled"}}
    books = session.permissions
    ended.shed(session)
    shared = ended.shared_parts()
    assert session.translator is shared.translator and session.turns is shared.turns
    assert session.terminals is shared.terminals and session.terminals.closed
    assert session.questions is shared.questions is not idle_questions
    assert session.permissions is books  # it holds the cancelled request: a late reply says why
    with pytest.raises(InvalidRequest, match="session terminated"):
        permission_requests.reply(session, "call_1", "once")
    assert session.state.available_commands == [] and session.state.totals.turns == 1
    # The shared books share an empty request table: a reply to an ended session's request that
    # is gone is an unknown id, as legacy answers one.
    other = FakeSession(tmp_path)
    other.ended, other.end_reason = True, "terminated"
    ended.shed(other)
    assert other.permissions is shared.permissions and not shared.permissions.pending
    with pytest.raises(InvalidRequest, match="unknown permission id: p1"):
        permission_requests.reply(other, "p1", "once")
    with pytest.raises(RuntimeError):
        shared.turns.submit(shared.turns.new_turn("late", [], []))


def test_what_an_end_records(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    ended.record_exit(session, ExitInfo(3, None), None)
    assert session.types() == ["error", "session.ended"]
    assert session.events()[-1][1]["exit_code"] == 3 and session.events()[-1][1]["terminated_by"] == "agent"
    assert ended.stop_reason(session) == "terminated"
    session.exit_info = ExitInfo(None, 9)
    assert ended.stop_reason(session) == "exited"
    session.shutting_down = True
    assert ended.stop_reason(session) == "shutdown"


def test_a_session_restored_ended_lists_its_tokens_and_sheds_its_parts(tmp_path: Path) -> None:
    fake = FakeSession(tmp_path)
    totals = {"turns": 2, "inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
    fake.state.totals.restore(totals, None)
    fake.ended, fake.end_reason = True, "terminated"
    settings = Settings(data_dir=tmp_path / "data")
    manager = SessionManager(
        settings, AgentRegistry(install_dir=tmp_path / "agents"), MemoryEventStore(), ClientServices()
    )
    session = manager.restored(listing.saved_record(fake))
    assert isinstance(session, Session) and session.phase is Phase.ENDED
    assert session.info()["_meta"] == {"sandbox-agent/usage": totals}
    assert session.translator is ended.shared_parts().translator
    assert not ended.shared_parts().translator.state.totals.turns  # the shared one is fed nothing
