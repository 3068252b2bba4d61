"""What translation produces: legacy events before the log gives them a sequence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The 13 legacy UniversalEvent types.
SESSION_STARTED = "session.started"
SESSION_ENDED = "session.ended"
TURN_STARTED = "turn.started"
TURN_ENDED = "turn.ended"
ITEM_STARTED = "item.started"
ITEM_DELTA = "item.delta"
ITEM_COMPLETED = "item.completed"
ERROR = "error"
PERMISSION_REQUESTED = "permission.requested"
PERMISSION_RESOLVED = "permission.resolved"
QUESTION_REQUESTED = "question.requested"
QUESTION_RESOLVED = "question.resolved"
AGENT_UNPARSED = "agent.unparsed"

EVENT_TYPES = (
    SESSION_STARTED,
    SESSION_ENDED,
    TURN_STARTED,
    TURN_ENDED,
    ITEM_STARTED,
    ITEM_DELTA,
    ITEM_COMPLETED,
    ERROR,
    PERMISSION_REQUESTED,
    PERMISSION_RESOLVED,
    QUESTION_REQUESTED,
    QUESTION_RESOLVED,
    AGENT_UNPARSED,
)

# messages/stream closes after the first of these (legacy §6.3).
TERMINAL_TYPES = frozenset({TURN_ENDED, SESSION_ENDED, ERROR, AGENT_UNPARSED, PERMISSION_REQUESTED, QUESTION_REQUESTED})


@dataclass(slots=True)
class EventDraft:
    """A legacy event without envelope numbers. ``raw`` is the ACP message(s) it came from."""

    type: str
    data: dict[str, Any]
    synthetic: bool = False
    raw: Any = None
    native_session_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
