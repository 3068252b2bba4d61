"""Reading the end of a session's log after a restart: what the old agent left open, and where the
numbering of turns, items and user messages goes on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from app.events.log import StoredEvent
from app.events.store import MemoryEventStore
from app.sessions import recovery
from app.sessions.recovery import PAGE, read_log_end


def _store(events: list[tuple[str, dict[str, Any]]]) -> MemoryEventStore:
    store = MemoryEventStore()
    for sequence, (event_type, data) in enumerate(events, 1):
        body = json.dumps({"sequence": sequence, "type": event_type, "data": data})
        store.append(StoredEvent("s", sequence, event_type, body))
    return store


def _item(item_id: str, role: str = "assistant", native: str | None = None, kind: str = "message") -> dict[str, Any]:
    return {"item": {"item_id": item_id, "native_item_id": native, "kind": kind, "role": role, "content": []}}


def _turn(n: int, user: int | None, *, ended: bool = True, extra: int = 0) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [("turn.started", {"phase": "started", "turn_id": f"turn_{n}"})]
    if user is not None:
        out += [("item.started", _item(f"itm_{user}", "user", f"user_{user}"))]
        out += [("item.completed", _item(f"itm_{user}", "user", f"user_{user}"))]
    for _ in range(extra):
        out += [("item.delta", {"item_id": f"itm_{user}", "native_item_id": None, "delta": "x"})]
    if ended:
        out.append(("turn.ended", {"phase": "ended", "turn_id": f"turn_{n}"}))
    return out


def _read(events: list[tuple[str, dict[str, Any]]]) -> recovery.LogState:
    return asyncio.run(read_log_end(_store(events), "s", len(events)))


def test_what_a_crash_mid_turn_left_open() -> None:
    events = [("session.started", {}), *_turn(1, 1), *_turn(2, 2, ended=False)]
    events += [("item.started", _item("itm_3", native="reply")), ("permission.requested", {"permission_id": "p1"})]
    events += [("question.requested", {"question_id": "q1"}), ("question.resolved", {"question_id": "q1"})]
    found = _read(events)
    assert found.ended is None
    assert (found.turns, found.items, found.user_messages) == (2, 3, 2)
    assert found.open_turn == "turn_2"
    assert list(found.open_items) == ["itm_3"]
    assert list(found.permissions) == ["p1"] and not found.questions
    assert found.permission_ids == {"p1"} and found.question_ids == {"q1"}


def test_a_logged_end_is_found() -> None:
    events = [("session.started", {}), *_turn(1, 1), ("session.ended", {"reason": "terminated"})]
    assert _read(events).ended == {"reason": "terminated"}


def test_counters_are_found_before_a_long_last_turn_without_items() -> None:
    # The last turn has no user item and more events than a page: the reader goes back further.
    events = [("session.started", {}), *_turn(1, 1), *_turn(2, None, extra=PAGE * 2 + 10)]
    found = _read(events)
    assert (found.turns, found.items, found.user_messages) == (2, 1, 1)
    assert found.open_turn is None and not found.open_items


def test_drafts_close_what_was_open() -> None:
    events = [("session.started", {}), *_turn(1, 1, ended=False), ("item.started", _item("itm_2"))]
    events += [("permission.requested", {"permission_id": "p1", "action": "x", "status": "requested"})]
    events += [("question.requested", {"question_id": "q1", "prompt": "?", "options": [], "response": None})]
    drafts = recovery._close_what_was_open(_read(events))
    assert [d.type for d in drafts] == ["permission.resolved", "question.resolved", "item.completed", "turn.ended"]
    assert drafts[0].data["status"] == "reject" and drafts[1].data["status"] == "rejected"
    assert drafts[2].data["item"]["status"] == "failed"
    assert drafts[3].data["turn_id"] == "turn_1" and drafts[3].data["metadata"]["stopReason"] == "error"


def test_a_record_says_how_the_session_was_left() -> None:
    assert recovery.adopt({"endReason": "terminated"}) is None
    crash = recovery.adopt({"endReason": None, "permissionIds": ["p1"]})
    assert crash is not None and crash.cause == "crash" and not crash.settled and crash.permission_ids == ["p1"]
    stop = recovery.adopt({"endReason": None, "stopped": "shutdown"})
    assert stop is not None and stop.cause == "shutdown"
    again = recovery.adopt({"endReason": None, "recovery": {"cause": "shutdown", "settled": True, "suspended": True}})
    assert again is not None and again.cause == "shutdown" and again.settled
