"""The server's log lines: text (the default) or one JSON object per line, with the session id and
the trace id where they are known.

The session id comes from the record (``extra={"session_id": ...}``) or from ``current_session``,
which a session sets in the tasks that work for it (their children inherit it); the trace id from
the active OpenTelemetry span, when tracing is on.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(levelname)-9s %(name)s: %(message)s"

current_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("acp_bridge_session", default=None)


def trace_id() -> str | None:
    """The active span's trace id (32 hex digits), if tracing is loaded and a span is active."""
    trace = sys.modules.get("opentelemetry.trace")  # never imported here: only when tracing is on
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": stamp(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        session = getattr(record, "session_id", None) or current_session.get()
        if session is not None:
            line["session_id"] = session
        trace = getattr(record, "trace_id", None) or trace_id()
        if trace is not None:
            line["trace_id"] = trace
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        # One line whatever the message holds (newlines are escaped by JSON).
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level_name: str, log_format: str) -> None:
    """Logging of the server process: the bridge's records (and the ACP SDK's, and uvicorn's when
    ``json``) on stderr at the chosen level."""
    level = logging.getLevelName(level_name.upper())
    level = level if isinstance(level, int) else logging.INFO
    if log_format == "json":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level, handlers=[handler], force=True)
    else:
        logging.basicConfig(level=level, format=TEXT_FORMAT)


def line(message: str, log_format: str, level: str = "info") -> str:
    """A line the server prints itself (its start-up line), in the log's format."""
    if log_format != "json":
        return message
    return json.dumps(
        {"time": stamp(datetime.now(UTC)), "level": level, "logger": "acp_rest_bridge", "message": message},
        ensure_ascii=False,
    )
