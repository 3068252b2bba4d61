"""Server-sent events: an incremental decoder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from .models import UniversalEvent


@dataclass(frozen=True)
class Frame:
    """One dispatched SSE event: its ``id:`` (None when absent) and its joined ``data:`` lines."""

    id: str | None
    data: str

    def event(self) -> UniversalEvent:
        return cast(UniversalEvent, json.loads(self.data))


class SseDecoder:
    """Feeds on text chunks as they arrive; returns the frames completed by each chunk.

    Lines end in LF, CRLF or CR; comment lines (``: keep-alive``) and unknown fields are ignored."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: str) -> list[Frame]:
        self._buffer += chunk
        frames: list[Frame] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return frames
            line, self._buffer = self._buffer[: cut[0]], self._buffer[cut[1] :]
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)

    def _line(self, line: str) -> Frame | None:
        if not line:
            if not self._data:
                return None
            frame = Frame(self._id, "\n".join(self._data))
            self._data, self._id = [], None
            return frame
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def _line_end(buffer: str) -> tuple[int, int] | None:
    """(end of the first complete line, start of the next) or None. A trailing CR waits for the next
    chunk, which may bring its LF."""
    lf = buffer.find("\n")
    cr = buffer.find("\r", 0, lf if lf != -1 else len(buffer))
    if cr == -1:
        return None if lf == -1 else (lf, lf + 1)
    if cr + 1 == len(buffer):
        return None
    return cr, cr + (2 if buffer[cr + 1] == "\n" else 1)
