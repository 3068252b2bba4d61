"""The legacy UniversalEvent envelope: time format and key order (behavior §5.1)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

# The C encoder that ``JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode`` builds anew
# for every call, built once (that is ~40% of encoding an event's small dicts). Same output and
# errors, except that no circular-reference check is made: the values are parsed or built
# JSON, never circular.
_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, json.JSONEncoder().default, encode_basestring, None, ":", ",", False, False, True
)


def _dumps(value: Any) -> str:
    return "".join(_encode(value, 0))


def dumps(value: Any) -> str:
    """Compact JSON as the legacy server wrote it."""
    return _dumps(value)


# The second last formatted: (its first ns, its text). One tuple, so a thread never sees half of it.
_second: tuple[int, str] = (0, datetime.fromtimestamp(0, UTC).strftime("%Y-%m-%dT%H:%M:%S"))


def format_time(ns: int) -> str:
    """RFC 3339 UTC with ``Z``; fraction only when non-zero, trailing zeros dropped."""
    global _second
    start, base = _second
    frac = ns - start
    if not 0 <= frac < 1_000_000_000:  # events come many per second: format the second once
        seconds, frac = divmod(ns, 1_000_000_000)
        base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (ns - frac, base)
    if frac:
        # str() of 1xxxxxxxxx: the nine digits, zero-padded, cheaper than a format spec.
        return f"{base}.{str(1_000_000_000 + frac)[1:].rstrip('0')}Z"
    return base + "Z"


def now_ns() -> int:
    return time.time_ns()


def envelope_json(
    *,
    sequence: int,
    time_ns: int,
    session_id: str,
    native_session_id: str | None,
    synthetic: bool,
    event_type: str,
    data: dict[str, Any],
    data_json: str | None = None,
) -> str:
    """The event as compact JSON with ``"raw":null`` as its last member.

    Keeping raw last lets readers that asked for include_raw splice the stored raw JSON in
    without parsing the event again.
    """
    # Written out rather than through a dict: this runs for every event (the hot path), and the
    # key order is fixed anyway. Strings go through the encoder's own escaping, so the result is
    # exactly what dumps() of the dict gives.
    native = "null" if native_session_id is None else encode_basestring(native_session_id)
    source = '"synthetic":true,"source":"daemon"' if synthetic else '"synthetic":false,"source":"agent"'
    return (
        f'{{"event_id":"evt_{sequence}","sequence":{sequence},"time":"{format_time(time_ns)}",'
        f'"session_id":{encode_basestring(session_id)},"native_session_id":{native},{source},'
        f'"type":{encode_basestring(event_type)},"data":{data_json or _dumps(data)},"raw":null}}'
    )


RAW_NULL_SUFFIX = '"raw":null}'


def with_raw(event_json: str, raw_json: str | None) -> str:
    """Splice the stored raw JSON into an event serialised by :func:`envelope_json`."""
    if raw_json is None or raw_json == "null":
        return event_json
    return event_json[: -len(RAW_NULL_SUFFIX)] + '"raw":' + raw_json + "}"
