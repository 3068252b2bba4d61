"""One event as the log and the stores keep it (``StoredEvent``), apart from the log so that the
stores, which hold and return such events, need nothing of the log."""

from __future__ import annotations

from typing import Any

from app.events.envelope import dumps, with_raw
from app.events.model import raw_json_text
from app.events.text import clean_text

_UNSET: Any = object()


class StoredEvent:
    """One event of the log: its envelope as compact JSON (``"raw":null`` last) and its raw ACP
    payload as JSON, serialised on first use (by the store's writer, off the agent's path)."""

    __slots__ = ("_frame", "_raw", "_raw_json", "json", "sequence", "session_id", "size", "time_ns", "type")

    def __init__(
        self,
        session_id: str,
        sequence: int,
        type: str,
        json: str,
        raw_json: str | None = None,
        time_ns: int = 0,
        *,
        raw: Any = _UNSET,
    ) -> None:
        self.session_id = session_id
        self.sequence = sequence
        self.type = type
        self.json = json
        self.time_ns = time_ns
        self._raw = raw
        self._raw_json = raw_json if raw is _UNSET else _UNSET
        self._frame: bytes | None = None
        # What it holds in memory, roughly (an unserialised raw counts as its envelope's size).
        self.size = 2 * len(json) + (len(raw_json) if raw_json is not None else len(json) if raw is not _UNSET else 0)

    @property
    def raw_json(self) -> str | None:
        value = self._raw_json
        if value is _UNSET:
            raw = self._raw
            # Two threads may get here at once: both compute the same string.
            value = self._raw_json = None if raw is None else raw_to_json(raw)
            self._raw = None
        return value

    def render(self, include_raw: bool) -> str:
        return with_raw(self.json, self.raw_json) if include_raw else self.json

    @property
    def frame(self) -> bytes:
        """The SSE frame (without raw): made once, shared by every reader of the session."""
        frame = self._frame
        if frame is None:
            text = f"id: {self.sequence}\ndata: {self.json}\n\n"
            try:  # (utf8(), inline: once per event)
                frame = self._frame = text.encode()
            except UnicodeEncodeError:
                frame = self._frame = utf8(text)
        return frame

    def replace_text(self, event_json: str, raw_json: str | None, event_type: str | None = None) -> None:
        """Replace what the event says (the store's last line of defence against text it cannot
        keep); only before the event is visible."""
        self.json = event_json
        if event_type is not None:
            self.type = event_type
        self._raw = None
        self._raw_json = raw_json
        self._frame = None

    def __repr__(self) -> str:
        return f"StoredEvent({self.session_id!r}, {self.sequence}, {self.type!r})"


def raw_to_json(raw: Any) -> str:
    """JSON of a raw payload: the agent's own text where it was kept (see ``raw_json_text``);
    in a list of kept messages, a ``str`` entry is such a text."""
    text = raw_json_text(raw)
    if text is not None:
        return text
    if type(raw) is list:
        return "[" + ",".join(entry if type(entry) is str else raw_to_json(entry) for entry in raw) + "]"
    return dumps(raw)


def utf8(text: str) -> bytes:
    """UTF-8 of text that may hold a lone surrogate (which becomes U+FFFD): never raises."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return clean_text(text).encode()
