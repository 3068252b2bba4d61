"""Events are stored without what their row and session say (``envelope.pack``) and read back byte
for byte (``envelope.unpack``); whole envelopes (earlier stores, odd shapes) are read as they are."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.events.envelope import envelope_json, pack, unpack
from app.events.log import StoredEvent
from app.events.sqlite import SqliteBackend
from app.events.writer import BatchWriter

NATIVE = '"na\\"tive"'
UPDATE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"x"}}}'


def event(session_id: str, native: str | None, synthetic: bool, event_type: str, data: dict[str, object]) -> str:
    return envelope_json(
        sequence=42,
        time_ns=1_790_000_000_120_000_000,
        session_id=session_id,
        native_session_id=native,
        synthetic=synthetic,
        event_type=event_type,
        data=data,
    )


@pytest.mark.parametrize(
    ("session_id", "native", "synthetic", "event_type", "data", "raw"),
    [
        ("s", "n-1", False, "item.delta", {"item_id": "itm_1", "delta": "hi"}, UPDATE % '"n-1"'),
        ("s", None, True, "turn.started", {"turn_id": "t"}, None),
        ('odd "id",\n\\', 'na"tive', False, "item.completed", {"x": '","type":"no"'}, f"[{UPDATE % NATIVE}]"),
        ("s", "n", False, "error", {"message": "\u2028 \ud83d\ude00"}, '{"other":"shape"}'),
        ("s", "n", True, "item.delta", {}, UPDATE % '"n"' + "," + UPDATE % '"elsewhere"'),
    ],
)
def test_pack_and_unpack_give_the_event_back(
    session_id: str, native: str | None, synthetic: bool, event_type: str, data: dict[str, object], raw: str | None
) -> None:
    envelope = event(session_id, native, synthetic, event_type, data)
    stored, stored_raw = pack(session_id, 42, event_type, envelope, raw)
    assert not stored.startswith("{") and len(stored) < len(envelope) - 60
    assert unpack(session_id, 42, event_type, stored, stored_raw) == (envelope, raw)
    if raw is not None and '"n-1"' in raw:
        assert stored_raw is not None and len(stored_raw) < len(raw) - 50


def test_what_does_not_fit_the_form_is_stored_whole() -> None:
    envelope = event("s", "n", False, "item.delta", {"a": 1})
    for session_id, sequence, event_type in (("other", 42, "item.delta"), ("s", 41, "item.delta"), ("s", 42, "error")):
        assert pack(session_id, sequence, event_type, envelope, None) == (envelope, None)
    odd = envelope.replace('"synthetic":false,"source":"agent"', '"synthetic":true,"source":"agent"')
    assert pack("s", 42, "item.delta", odd, None) == (odd, None)
    assert unpack("s", 42, "item.delta", envelope, "[1]") == (envelope, "[1]")


def test_the_store_reads_both_forms(tmp_path: Path) -> None:
    envelope = event("s", "n", False, "item.delta", {"a": 1})
    raw = UPDATE % '"n"'
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    store.append(StoredEvent("s", 42, "item.delta", envelope, raw))
    store.save_session("s", {"info": {"sessionId": "s"}})
    store.close()
    conn = sqlite3.connect(tmp_path / "events.sqlite3")
    stored, stored_raw = conn.execute("SELECT json, raw FROM events").fetchone()
    assert stored.startswith("2026-") and stored_raw.startswith("\x01")
    # A row of a store written before the packed form.
    conn.execute("INSERT INTO events VALUES (1, 43, 'item.delta', ?, ?)", (envelope.replace("42", "43"), raw))
    conn.commit()
    conn.close()
    store = BatchWriter(SqliteBackend(tmp_path))
    store.open()
    try:
        read = store.read("s", 0, None)
        assert [(e.sequence, e.json, e.raw_json) for e in read] == [
            (42, envelope, raw),
            (43, envelope.replace("42", "43"), raw),
        ]
    finally:
        store.close()
