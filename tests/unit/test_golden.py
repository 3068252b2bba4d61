"""Recorded ACP traffic translates to the reviewed legacy events.

Project recordings live in ``tests/golden/transcripts/*.jsonl`` (any file dropped there is picked up)
with their reviewed ``<name>.expected.json``; the shared transcripts in ``../shared/acp/transcripts``
are checked when present. Regenerate expectations with ``python -m tests.golden.regen`` and review
the diff.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from app.events.model import EventDraft
from tests.golden.harness import (
    expected_path,
    load,
    project_transcripts,
    replay,
    replay_transcript,
    shared_transcripts,
    summarize,
)
from tests.support import ROOT, SHARED_MISSING

REGEN = "run `.venv/bin/python -m tests.golden.regen` and review the diff"


def check_invariants(drafts: list[EventDraft]) -> None:
    """No agent.unparsed; every tool_call item paired with a tool_result; items start before they end."""
    unparsed = [d.data for d in drafts if d.type == "agent.unparsed"]
    assert unparsed == []
    completed = [d.data["item"] for d in drafts if d.type == "item.completed"]
    calls = {i["item_id"]: i for i in completed if i["kind"] == "tool_call"}
    results = {i["parent_id"]: i for i in completed if i["kind"] == "tool_result"}
    assert set(calls) == set(results), "every tool call needs its tool result"
    for item_id, call in calls.items():
        assert results[item_id]["content"][0]["call_id"] == call["content"][0]["call_id"]
    started: set[str] = set()
    for draft in drafts:
        if draft.type == "item.started":
            started.add(draft.data["item"]["item_id"])
        elif draft.type == "item.completed":
            assert draft.data["item"]["item_id"] in started
        elif draft.type == "item.delta":
            assert draft.data["item_id"] in started


def compare(transcript: Path, drafts: list[EventDraft]) -> None:
    target = expected_path(transcript)
    assert target.exists(), f"no reviewed events for {transcript.name}: {REGEN}"
    expected = json.loads(target.read_text(encoding="utf-8"))["events"]
    assert [summarize(d) for d in drafts] == expected, f"{transcript.name} translates differently: {REGEN}"


@pytest.mark.parametrize("transcript", project_transcripts(), ids=lambda p: p.name)
def test_project_recordings_match_the_reviewed_events(transcript: Path) -> None:
    drafts = replay_transcript(transcript)
    check_invariants(drafts)
    compare(transcript, drafts)


SHARED = shared_transcripts()


@pytest.mark.parametrize("transcript", SHARED or [None], ids=lambda p: p.name if p else "absent")
def test_shared_transcripts_translate_cleanly(transcript: Path | None) -> None:
    if transcript is None:
        pytest.skip(SHARED_MISSING)
    drafts = replay_transcript(transcript)
    check_invariants(drafts)
    kinds = Counter(d.data["item"]["kind"] for d in drafts if d.type == "item.completed")
    assert kinds["tool_call"] > 0 and kinds["message"] > 0
    if expected_path(transcript).exists():
        compare(transcript, drafts)


def test_every_recorded_message_is_accounted_for() -> None:
    """Each agent notification in the recordings produced events or changed session state."""
    for transcript in [*project_transcripts(), *SHARED]:
        records = load(transcript)
        drafts = replay(records)
        sources = {id(d.raw) for d in drafts} | {id(r) for d in drafts if isinstance(d.raw, list) for r in d.raw}
        for record in records:
            msg = record["msg"]
            if record["dir"] != "agent->client" or msg.get("method") != "session/update":
                continue
            kind = msg["params"]["update"]["sessionUpdate"]
            if kind in (
                "available_commands_update",
                "usage_update",
                "session_info_update",
                "current_mode_update",
                "config_option_update",
                "state_update",
            ):
                continue  # kept as session state
            assert id(msg) in sources, f"{transcript.name}: {kind} gave no event"


# ---- only legacy keys ------------------------------------------------------------------------------
CONTRACT = json.loads((ROOT / "openapi" / "openapi.json").read_text())["components"]["schemas"]
DATA_SCHEMA = {
    "session.started": "SessionStartedData",
    "session.ended": "SessionEndedData",
    "turn.started": "TurnEventData",
    "turn.ended": "TurnEventData",
    "item.started": "ItemEventData",
    "item.completed": "ItemEventData",
    "item.delta": "ItemDeltaData",
    "error": "ErrorData",
    "permission.requested": "PermissionEventData",
    "permission.resolved": "PermissionEventData",
    "question.requested": "QuestionEventData",
    "question.resolved": "QuestionEventData",
    "agent.unparsed": "AgentUnparsedData",
}
PART_KEYS = {
    part["properties"]["type"]["enum"][0]: set(part["properties"]) for part in CONTRACT["ContentPart"]["oneOf"]
}
# What the bridge adds inside a legacy value, documented (docs/events.md): the stop reason of a turn, what
# it used (tokens, cost) and the context window.
TURN_METADATA = {"stopReason", "usage", "cost", "context"}


def legacy_key_problems(drafts: list[EventDraft]) -> list[str]:
    """Keys no legacy client knows, inside the event data (ACP's extras belong in raw)."""
    problems = []
    for draft in drafts:
        known = set(CONTRACT[DATA_SCHEMA[draft.type]]["properties"])
        problems += [f"{draft.type}: {key}" for key in set(draft.data) - known]
        item = draft.data.get("item")
        if isinstance(item, dict):
            problems += [f"item: {key}" for key in set(item) - set(CONTRACT["UniversalItem"]["properties"])]
            for part in item.get("content", []):
                extra = set(part) - PART_KEYS.get(part.get("type"), set())
                problems += [f"{part.get('type')} part: {key}" for key in extra]
        if draft.type == "turn.ended":
            problems += [f"turn.ended metadata: {key}" for key in set(draft.data["metadata"]) - TURN_METADATA]
    return problems


@pytest.mark.parametrize("transcript", project_transcripts() + SHARED, ids=lambda p: p.name)
def test_events_hold_only_legacy_keys(transcript: Path) -> None:
    assert legacy_key_problems(replay_transcript(transcript)) == []
