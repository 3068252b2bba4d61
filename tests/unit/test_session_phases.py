"""The session lifecycle's table: every phase has its steps; an ended session goes nowhere."""

from __future__ import annotations

from app.sessions.phases import TRANSITIONS, Phase


def test_every_phase_has_its_steps() -> None:
    assert set(TRANSITIONS) == set(Phase)
    assert TRANSITIONS[Phase.ENDED] == frozenset()
    assert TRANSITIONS[Phase.ENDING] == {Phase.ENDED}
    # A live session never becomes suspended in this run: only a restored one is.
    assert Phase.SUSPENDED not in TRANSITIONS[Phase.RUNNING] | TRANSITIONS[Phase.ENDING]
