"""Tokens and cost per turn and per session, from the agents' own words (``app/translate/usage.py``):
ACP's prompt ``usage``, ``_meta.quota`` (gemini, codex), ``usage_update``'s running cost; and the
legacy ``thread.token_usage.updated`` status item for codex, read from its real recording."""

from __future__ import annotations

import json
from typing import Any

from app.translate.session_translator import SessionTranslator
from app.translate.usage import Totals, turn_tokens
from tests.golden.harness import PROJECT_TRANSCRIPTS, replay_transcript


def test_acp_usage_is_taken_as_the_agent_gave_it() -> None:
    result = {
        "stopReason": "end_turn",
        "usage": {
            "totalTokens": 585,
            "inputTokens": 360,
            "cachedReadTokens": 90,
            "outputTokens": 135,
            "thoughtTokens": 33,
            "extra": 1,
        },
    }
    assert turn_tokens(result) == {
        "inputTokens": 360,
        "outputTokens": 135,
        "cachedReadTokens": 90,
        "thoughtTokens": 33,
        "totalTokens": 585,
    }


def test_quota_counts_stand_in_when_there_is_no_usage() -> None:
    gemini = {"_meta": {"quota": {"token_count": {"input_tokens": 60, "output_tokens": 30}}}}
    assert turn_tokens(gemini) == {"inputTokens": 60, "outputTokens": 30, "totalTokens": 90}
    codex = {
        "_meta": {
            "quota": {
                "token_count": {
                    "inputTokens": 5,
                    "cachedInputTokens": 2,
                    "reasoningOutputTokens": 1,
                    "outputTokens": 3,
                    "totalTokens": 10,
                }
            }
        }
    }
    assert turn_tokens(codex) == {
        "inputTokens": 5,
        "outputTokens": 3,
        "cachedReadTokens": 2,
        "thoughtTokens": 1,
        "totalTokens": 10,
    }


def test_nonsense_is_left_out() -> None:
    assert turn_tokens({"usage": {"inputTokens": -1, "outputTokens": "3", "thoughtTokens": True}}) is None
    assert turn_tokens("end_turn") is None


def test_a_turns_cost_is_what_the_running_cost_added() -> None:
    totals = Totals()
    totals.usage_update({"used": 10, "size": 100, "cost": {"amount": 0.004, "currency": "USD"}})
    assert totals.end_turn({}).cost == (0.004, "USD")
    totals.usage_update({"cost": {"amount": 0.005, "currency": "USD"}})
    first = totals.end_turn({"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}})
    assert first.cost is not None and round(first.cost[0], 9) == 0.001
    assert totals.end_turn({}).cost is None  # nothing said during the turn
    totals.usage_update({"cost": {"amount": 0.002, "currency": "USD"}})  # the agent counts from 0 again
    assert totals.end_turn({}).cost == (0.002, "USD")
    assert totals.info() == {
        "turns": 3,
        "inputTokens": 1,
        "outputTokens": 2,
        "totalTokens": 3,
        "cost": {"amount": 0.007, "currency": "USD"},
    }
    for bad in ({"amount": -1, "currency": "USD"}, {"amount": float("nan"), "currency": "USD"}, {"amount": 1}):
        totals.usage_update({"cost": bad})
        assert totals.end_turn({}).cost is None


def test_totals_survive_a_restart_of_the_server() -> None:
    totals = Totals()
    totals.usage_update({"cost": {"amount": 0.5, "currency": "USD"}})
    totals.end_turn({"usage": {"inputTokens": 7, "outputTokens": 1, "totalTokens": 8}})
    again = Totals()
    again.restore(totals.info(), dict(totals.agent_cost))
    assert again.info() == totals.info() and again.agent_cost == {"USD": 0.5}
    again.usage_update({"cost": {"amount": 0.75, "currency": "USD"}})  # the same agent session, resumed
    assert again.end_turn({}).cost == (0.25, "USD")


def test_turn_ended_shows_the_usage_the_cost_and_the_context() -> None:
    t = SessionTranslator()
    t.session_update(
        {
            "update": {
                "sessionUpdate": "usage_update",
                "used": 50,
                "size": 1000,
                "cost": {"amount": 0.01, "currency": "USD"},
            }
        },
        None,
    )
    [ended] = t.turn_result(
        "turn_1", {"stopReason": "end_turn", "usage": {"inputTokens": 40, "outputTokens": 10, "totalTokens": 50}}, None
    )
    assert ended.data["metadata"] == {
        "stopReason": "end_turn",
        "usage": {"inputTokens": 40, "outputTokens": 10, "totalTokens": 50},
        "cost": {"amount": 0.01, "currency": "USD"},
        "context": {"used": 50, "size": 1000},
    }


def status_items(drafts: list[Any]) -> list[dict[str, Any]]:
    return [d.data["item"] for d in drafts if d.type == "item.completed" and d.data["item"]["kind"] == "status"]


def test_codex_turns_show_the_legacy_token_usage_status_item() -> None:
    drafts = replay_transcript(PROJECT_TRANSCRIPTS / "legacy-codex.jsonl")
    [item] = [i for i in status_items(drafts) if i["content"][0]["label"] == "thread.token_usage.updated"]
    assert item["role"] == "system" and item["native_item_id"] is None and item["status"] == "completed"
    detail = json.loads(item["content"][0]["detail"])
    last = {
        "cachedInputTokens": 0,
        "inputTokens": 50,
        "outputTokens": 25,
        "reasoningOutputTokens": 0,
        "totalTokens": 75,
    }
    assert detail == {
        "threadId": "<SESSION_ID>",
        "turnId": "turn_1",
        "tokenUsage": {"total": last, "last": last, "modelContextWindow": 258400},
    }
    ended = [d for d in drafts if d.type == "turn.ended"][-1]
    assert ended.data["metadata"]["usage"]["totalTokens"] == 75
    types = [d.type for d in drafts]
    assert types.index("turn.ended") > max(i for i, d in enumerate(drafts) if d.type == "item.completed")
    # Only codex has it, as in legacy.
    assert not [
        i
        for i in status_items(replay_transcript(PROJECT_TRANSCRIPTS / "legacy-claude.jsonl"))
        if i["content"][0]["label"] == "thread.token_usage.updated"
    ]
