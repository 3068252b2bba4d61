"""The legacy UniversalEvent envelope: time format and key order (behavior §5.1)."""

from __future__ import annotations

import functools
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


# ---- the stored form ------------------------------------------------------------------------------
# An event is stored without what its row and its session already say: the store keeps
#
#   json: "<time> <a|d><native_session_id JSON>\n<data JSON>"   (a = agent, not synthetic; d = daemon, synthetic)
#   raw:  the raw JSON with each "{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":<native
#         id JSON>,"update":{" replaced by "\x01" (a JSON text never holds a raw control character)
#
# and ``unpack`` makes the envelope again from them and the row's session id, sequence and type,
# byte for byte. An envelope that is not exactly of ``envelope_json``'s shape is stored whole (it
# starts with "{"), as are all events of stores written before this form, and read as they are.
_AGENT = '"synthetic":false,"source":"agent"'
_DAEMON = '"synthetic":true,"source":"daemon"'
_UPDATE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
_MARK = "\x01"
_RAW_TAIL = ',"raw":null}'


@functools.lru_cache(maxsize=256)
def _ids(session_id: str) -> str:
    return f',"session_id":{encode_basestring(session_id)},"native_session_id":'


@functools.lru_cache(maxsize=256)
def _typed(event_type: str) -> str:
    return f',"type":{encode_basestring(event_type)},"data":'


def pack(
    session_id: str, sequence: int, event_type: str, event_json: str, raw_json: str | None
) -> tuple[str, str | None]:
    """The stored form of an event's envelope and raw JSON (see above)."""
    head = f'{{"event_id":"evt_{sequence}","sequence":{sequence},"time":"'
    if not event_json.startswith(head) or not event_json.endswith(_RAW_TAIL):
        return event_json, raw_json
    time_end = event_json.find('"', len(head))
    ids = _ids(session_id)
    if time_end < 0 or not event_json.startswith(ids, time_end + 1):
        return event_json, raw_json
    native_start = time_end + 1 + len(ids)
    typed = _typed(event_type)
    flag, source = "a", _AGENT
    native_end = event_json.find("," + source + typed, native_start)
    if native_end < 0:
        flag, source = "d", _DAEMON
        native_end = event_json.find("," + source + typed, native_start)
        if native_end < 0:
            return event_json, raw_json
    time = event_json[len(head) : time_end]
    native = event_json[native_start:native_end]
    if " " in time or "\n" in native:
        return event_json, raw_json
    data = event_json[native_end + 1 + len(source) + len(typed) : -len(_RAW_TAIL)]
    if raw_json is not None and _MARK not in raw_json:
        raw_json = raw_json.replace(f'{_UPDATE}{native},"update":{{', _MARK)
    return f"{time} {flag}{native}\n{data}", raw_json


def unpack(session_id: str, sequence: int, event_type: str, stored: str, raw: str | None) -> tuple[str, str | None]:
    """The envelope and raw JSON of a stored event (``pack`` undone)."""
    if stored.startswith("{"):
        return stored, raw
    space = stored.index(" ")
    newline = stored.index("\n", space)
    native = stored[space + 2 : newline]
    source = _AGENT if stored[space + 1] == "a" else _DAEMON
    event_json = (
        f'{{"event_id":"evt_{sequence}","sequence":{sequence},"time":"{stored[:space]}"'
        f"{_ids(session_id)}{native},{source}{_typed(event_type)}{stored[newline + 1 :]}{_RAW_TAIL}"
    )
    if raw is not None and _MARK in raw:
        raw = raw.replace(_MARK, f'{_UPDATE}{native},"update":{{')
    return event_json, raw


def stored_time(stored: str) -> str | None:
    """The ``time`` of a stored event without making its envelope (None for a whole envelope)."""
    return None if stored.startswith("{") else stored[: stored.find(" ")]


def stored_time_ns(stored: str) -> int:
    """When a stored event was recorded (its envelope's ``time``), in ns since the epoch; 0 when
    it cannot be told."""
    try:
        stamp = stored_time(stored) or json.loads(stored)["time"]  # 2026-01-30T10:15:42.123456789Z
        seconds = datetime.fromisoformat(stamp[:19]).replace(tzinfo=UTC).timestamp()
        fraction = stamp[20:-1] if stamp[19:20] == "." else ""
        return int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9] or 0)
    except (ValueError, KeyError, TypeError):
        return 0
