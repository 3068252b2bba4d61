"""The event model: legacy events before the log gives them a sequence (drafts), the 13 event types, raw payloads."""

from __future__ import annotations

from dataclasses import dataclass
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


class JsonText:
    """A raw payload held as the JSON text it arrived as (see ``kept_raw``)."""

    __slots__ = ("json_text",)

    def __init__(self, json_text: str) -> None:
        self.json_text = json_text

    def __repr__(self) -> str:
        return f"JsonText({self.json_text!r})"


def kept_raw(message: Any) -> Any:
    """What an open item keeps of one of its messages until it completes: the JSON text the
    message arrived as, when the connection kept it (``json_text``), else the message.

    A text is one object the garbage collector never looks at; a parsed message is four dicts it
    walks on every full collection, and a streamed message keeps thousands of them alive.
    """
    text = getattr(message, "json_text", None)
    return message if text is None else text


def item_raw(kept: list[Any]) -> Any:
    """The raw of an item made of the kept messages: one as itself, several as a list (whose
    ``str`` entries are JSON texts, see ``raw_json_text``)."""
    if not kept:
        return None
    if len(kept) > 1:
        return list(kept)
    only = kept[0]
    return JsonText(only) if type(only) is str else only


def raw_json_text(raw: Any) -> str | None:
    """The JSON of a raw payload when it is at hand without serialising: a message's own text,
    or a list of kept messages that all have theirs. None otherwise."""
    text: str | None = getattr(raw, "json_text", None)
    if text is not None:
        return text
    if type(raw) is list and raw:
        try:
            return _bracketed(raw)  # kept messages are their texts (``kept_raw``)
        except TypeError:
            pass
        texts: list[str] = []
        for entry in raw:
            if type(entry) is not str:
                entry = getattr(entry, "json_text", None)
                if entry is None:
                    return None
            texts.append(entry)
        return _bracketed(texts)
    return None


def _bracketed(texts: list[str]) -> str:
    """A JSON array of JSON texts, in one join at C speed; the brackets go on the first and last
    texts, since adding them to the joined text would copy it twice (megabytes, for the messages
    of a long streamed item). TypeError when an entry is not a str."""
    parts = texts.copy()
    parts[0] = "[" + parts[0]
    parts[-1] = parts[-1] + "]"
    return ",".join(parts)


@dataclass(slots=True)
class EventDraft:
    """A legacy event without envelope numbers. ``raw`` is the ACP message(s) it came from;
    ``data_json``, when set, is ``data`` already serialised (compact, as ``dumps`` writes it)."""

    type: str
    data: dict[str, Any]
    synthetic: bool = False
    raw: Any = None
    native_session_id: str | None = None
    data_json: str | None = None
