"""The short way for the common message chunk gives exactly what the general way gives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.events.model import EventDraft
from app.translate.messages import MessageAssembler
from app.translate.session_translator import SessionTranslator
from tests.unit.translate_support import end_turn, notification

taken = [0]


def _updates(rng: random.Random, count: int) -> list[dict[str, Any]]:
    texts = ["abc", "", "d e", "é", "\ud83d", "\ude00", "it's", "x" * 40]
    out: list[dict[str, Any]] = []
    for _ in range(count):
        kind = rng.choice(["agent_message_chunk"] * 12 + ["agent_thought_chunk", "user_message_chunk"])
        update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": rng.choice(texts)}}
        roll = rng.random()
        if roll < 0.8:
            update["messageId"] = rng.choice(["m1"] * 12 + ["m2", ""])
        if rng.random() < 0.05:
            update["content"] = {"type": "image", "data": "AA==", "mimeType": "image/png"}
        if rng.random() < 0.05:
            update["_meta"] = {"sandbox-agent/status": rng.choice(["completed", {"label": "x"}])}
        if rng.random() < 0.03:
            update["sessionUpdate"] = "plan"
            update["entries"] = []
        out.append(update)
    return out


def _run(updates: list[dict[str, Any]], fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[EventDraft]:
    with monkeypatch.context() as patch:
        if fast:
            original = MessageAssembler.more_text

            def counted(self: MessageAssembler, update: dict[str, Any], raw: Any) -> list[EventDraft] | None:
                result = original(self, update, raw)
                taken[0] += result is not None
                return result

            patch.setattr(MessageAssembler, "more_text", counted)
        else:
            patch.setattr(MessageAssembler, "more_text", lambda self, update, raw: None)
        t = SessionTranslator()
        out: list[EventDraft] = []
        for index, update in enumerate(updates):
            extra = {"_meta": {"sandbox-agent/synthetic": True}} if index % 17 == 5 else {}
            message = notification(update, **extra)
            out += t.session_update(message["params"], message)
        return out + end_turn(t)


@pytest.mark.parametrize("seed", range(20))
def test_the_short_way_for_chunks_changes_nothing(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    updates = _updates(random.Random(seed), 300)
    general = _run(updates, False, monkeypatch)
    taken[0] = 0
    short = _run(updates, True, monkeypatch)
    assert taken[0] > 30  # the short way was taken
    assert [(d.type, d.data, d.synthetic, d.raw, d.data_json) for d in short] == [
        (d.type, d.data, d.synthetic, d.raw, d.data_json) for d in general
    ]
