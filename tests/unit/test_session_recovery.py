"""Recovery alone on a fake session (``session_fake.FakeSession``): what a session that was live
when the bridge stopped gets at the next start (``settle``), what its record keeps, and a restart
that cannot start the agent (``revive``; no agent process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.errors import AgentNotInstalled
from app.events.log import StoredEvent
from app.events.store import MemoryEventStore
from app.sessions import recovery
from app.sessions.recovery import CRASH, SHUTDOWN, Recovery
from tests.unit.session_fake import FakeSession

# What the old process wrote: a turn that ended, and one cut short while its agent asked.
BEFORE: list[tuple[str, dict[str, Any]]] = [
    ("session.started", {}),
    ("turn.started", {"phase": "started", "turn_id": "turn_1"}),
    ("item.started", {"item": {"item_id": "itm_1", "native_item_id": "user_1", "role": "user", "content": []}}),
    ("item.completed", {"item": {"item_id": "itm_1", "native_item_id": "user_1", "role": "user", "content": []}}),
    ("turn.ended", {"phase": "ended", "turn_id": "turn_1"}),
    ("turn.started", {"phase": "started", "turn_id": "turn_2"}),
    ("item.started", {"item": {"item_id": "itm_2", "native_item_id": "user_2", "role": "user", "content": []}}),
    ("item.completed", {"item": {"item_id": "itm_2", "native_item_id": "user_2", "role": "user", "content": []}}),
    ("item.started", {"item": {"item_id": "itm_3", "native_item_id": None, "role": "assistant", "content": []}}),
    ("permission.requested", {"permission_id": "call_1", "action": "execute", "status": "requested"}),
    ("question.requested", {"question_id": "q_1", "prompt": "?", "options": [], "status": "requested"}),
]


def store_of(events: list[tuple[str, dict[str, Any]]]) -> MemoryEventStore:
    store = MemoryEventStore()
    for sequence, (event_type, data) in enumerate(events, 1):
        body = json.dumps({"sequence": sequence, "type": event_type, "data": data})
        store.append(StoredEvent("s1", sequence, event_type, body))
    return store


def suspended(tmp_path: Path, events: list[tuple[str, dict[str, Any]]], cause: str = CRASH) -> FakeSession:
    session = FakeSession(tmp_path, store=store_of(events))
    session.recovery = Recovery(cause=cause)
    session.suspended = True
    return session


async def test_settle_closes_what_the_old_agent_left_open(tmp_path: Path) -> None:
    session = suspended(tmp_path, BEFORE)
    await recovery.settle(session, session.store)
    added = session.events()[len(BEFORE) :]
    assert [t for t, _ in added] == [
        "permission.resolved",
        "question.resolved",
        "item.completed",
        "turn.ended",
        "item.started",
        "item.completed",
    ]
    assert added[0][1]["status"] == "reject" and added[1][1]["status"] == "rejected"
    assert added[2][1]["item"]["status"] == "failed"
    assert added[3][1]["metadata"]["stopReason"] == "error"
    status = added[-1][1]["item"]
    assert status["item_id"] == "itm_4"  # the numbering goes on
    assert status["content"][2]["json"]["_meta"][recovery.META] == {"state": "suspended", "cause": CRASH}
    assert session.recovery is not None and session.recovery.settled
    assert session.saved and session.saved[-1]["recovery"] == {"cause": CRASH, "settled": True, "suspended": True}
    # Turn and request numbering go on; a late reply to a request of the old agent says why it failed.
    assert session.turns.new_turn("next", [], []).turn_id == "turn_3"
    assert {"call_1"} <= session.permissions.used and {"q_1"} <= session.questions.used
    assert "bridge stopped" in session.permissions.died["call_1"]

    # Settled again (another restart before any message): nothing is added twice.
    again = suspended(tmp_path, session.events())
    again.recovery = recovery.adopt(session.saved[-1])
    await recovery.settle(again, again.store)
    assert again.events() == session.events()


async def test_a_session_whose_end_was_logged_stays_ended(tmp_path: Path) -> None:
    session = suspended(tmp_path, [*BEFORE[:5], ("session.ended", {"reason": "error"})])
    await recovery.settle(session, session.store)
    assert session.ended and session.end_reason == "error" and session.recovery is None
    assert session.saved and session.saved[-1]["endReason"] == "error"
    assert len(session.events()) == 6  # nothing added


def test_the_record_keeps_how_a_live_session_stopped(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    session.stopped_by_shutdown = True
    session.permissions.used |= {"call_1"}
    session.questions.used |= {"q_1"}
    fields = recovery.record_fields(session)
    assert fields == {"stopped": SHUTDOWN, "permissionIds": ["call_1"], "questionIds": ["q_1"]}
    adopted = recovery.adopt({"endReason": None, **fields})
    assert adopted is not None
    assert (adopted.cause, adopted.permission_ids, adopted.question_ids) == (SHUTDOWN, ["call_1"], ["q_1"])
    assert recovery.adopt({"endReason": "terminated", **fields}) is None


async def test_an_agent_that_cannot_start_again_ends_the_session_once(tmp_path: Path) -> None:
    session = suspended(tmp_path, BEFORE, cause=SHUTDOWN)  # its agent is not installed (no command)
    await recovery.settle(session, session.store)
    with pytest.raises(AgentNotInstalled):
        await recovery.revive(session)
    assert session.ended and session.end_reason == "error" and session.recovery is None
    kind, ended = session.events()[-1]
    assert kind == "session.ended" and ended["message"].startswith("cannot restart the agent: ")
    assert session.types().count("session.ended") == 1
    await recovery.revive(session)  # nothing more: it is not suspended any more
    assert session.types().count("session.ended") == 1
