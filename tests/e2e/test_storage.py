"""Storage under trouble: text SQLite cannot encode, a full disk, kill -9 in a burst, retention.
Real bridge processes on 127.0.0.1, real agent processes (the mock and the stream probe)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import (
    PROBES,
    create_session,
    events,
    iter_sse,
    send,
    start_bridge,
    types,
    wait_for_events,
    wait_until,
)
from tests.tiers import real_part


def _agents_file(tmp: Path) -> Path:
    path = tmp / "agents.toml"
    path.write_text(
        "[agents.probe-emoji]\n"
        f'command = ["{sys.executable}", "{PROBES / "stream_probe.py"}"]\n'
        'env = { PROBE_MODE = "split_emoji" }\n'
    )
    return path


def _texts(evs: list[dict[str, Any]], event_type: str) -> list[str]:
    out = []
    for e in evs:
        if e["type"] == event_type and e["data"].get("item", {}).get("kind") == "message":
            out.append("".join(p.get("text", "") for p in e["data"]["item"]["content"]))
    return out


# ---- text at the edges -------------------------------------------------------------------------
def test_an_agent_splitting_an_emoji_breaks_nothing_and_the_emoji_is_whole(tmp_path: Path) -> None:
    agents = _agents_file(tmp_path)
    bridge = start_bridge(tmp_path, "--agents-file", str(agents))
    try:
        client = bridge.client()
        create_session(client, "emoji", agent="probe-emoji")
        create_session(client, "other")
        send(client, "emoji", "go")
        seen = wait_for_events(client, "emoji", lambda evs: "turn.ended" in types(evs), include_raw=True)
        deltas = [e["data"]["delta"] for e in seen if e["type"] == "item.delta"]
        assert "\U0001f600 done" in deltas and "smile " in deltas
        assert "smile \U0001f600 done" in _texts(seen, "item.completed")
        assert "cut \ufffd" in _texts(seen, "item.completed")
        assert "x \ufffd y" in _texts(seen, "item.completed")
        # include_raw keeps the agent's own escaped text.
        raws = [json.dumps(e["raw"]) for e in seen if e["type"] == "item.delta"]
        assert any("\\ud83d" in raw for raw in raws)
        listed = client.get("/v1/sessions").json()["sessions"]
        assert [s["title"] for s in listed if s["sessionId"] == "emoji"] == ["title \ufffd"]
        # A client's lone surrogates (refused with 400, or taken and repaired) stop nothing either.
        headers = {"content-type": "application/json"}
        bad_title = client.post("/v1/sessions/bad", content=b'{"agent":"mock","title":"\\ud800x"}', headers=headers)
        assert bad_title.status_code in (200, 400), bad_title.text
        bad_message = client.post("/v1/sessions/other/messages", content=b'{"message":"\\ud800x"}', headers=headers)
        assert bad_message.status_code in (204, 400), bad_message.text
        assert client.get("/v1/sessions").status_code == 200
        # Every later event of every session is still stored.
        send(client, "other", "Reply with exactly the single word OK.")
        wait_for_events(
            client, "other", lambda evs: types(evs).count("turn.ended") == 1 + (bad_message.status_code == 204)
        )
        before = {sid: events(client, sid) for sid in ("emoji", "other")}
        assert client.post("/v1/sessions/emoji/terminate").status_code == 204
    finally:
        bridge.stop()
    again = start_bridge(tmp_path, "--agents-file", str(agents))
    try:
        client = again.client()
        after = {sid: events(client, sid) for sid in ("emoji", "other")}
        for sid in ("emoji", "other"):
            assert after[sid][: len(before[sid])] == before[sid]
        assert "\U0001f600" in json.dumps(after["emoji"], ensure_ascii=False)
    finally:
        again.stop()


# ---- a full disk ---------------------------------------------------------------------------------
SMALL_FS = 4 * 1024 * 1024


@real_part("namespaces")
def _namespaced(tmp: Path) -> tuple[list[str], str]:
    """A command prefix that runs the bridge in its own mount namespace with a small tmpfs at
    ``tmp/small`` (gone with the namespace); or the reason it cannot be made here."""
    if os.environ.get("ACP_BRIDGE_TEST_DISK_FULL") == "0":
        return [], "ACP_BRIDGE_TEST_DISK_FULL=0"
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "unshare (util-linux) is not installed"
    small = tmp / "small"
    small.mkdir()
    script = f'mount -t tmpfs -o size={SMALL_FS} tmpfs "$0" && exec "$@"'
    errors = []
    # As root a mount namespace is enough; without the capability, a user namespace may allow it.
    for flags in ("-m", "-rm") if os.geteuid() == 0 else ("-rm",):
        probe = subprocess.run(
            [unshare, flags, "sh", "-c", script, str(small), "true"], capture_output=True, text=True, timeout=10
        )
        if probe.returncode == 0:
            return [unshare, flags, "sh", "-c", script, str(small)], ""
        errors.append(f"unshare {flags}: {probe.stderr.strip()}")
    return [], "cannot mount a tmpfs in a mount namespace (" + "; ".join(errors) + ")"


def _cannot(reason: str) -> None:
    if os.environ.get("CI") and "ACP_BRIDGE_TEST_DISK_FULL" not in reason:
        pytest.fail(f"disk-full test cannot run: {reason}")
    pytest.skip(f"disk-full test cannot run: {reason} (it needs to mount a tmpfs: root or user namespaces)")


def _fill(directory: Path) -> Path:
    """Write until the filesystem is full; the filler file."""
    filler = directory / "filler"
    block = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(block)
        except OSError:
            pass
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError:
            pass
    return filler


def _timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


@pytest.mark.namespaces  # a small tmpfs in a mount namespace
def test_a_full_disk_is_loud_bounded_and_recovered_from(tmp_path: Path) -> None:
    prefix, reason = _namespaced(tmp_path)
    if not prefix:
        _cannot(reason)
    small = tmp_path / "small"
    bridge = start_bridge(tmp_path, data_dir=small / "data", wrapper=prefix)
    try:
        # The bridge's view of its data dir (its mount namespace) through /proc.
        inside = Path(f"/proc/{bridge.proc.pid}/root") / str(small).lstrip("/")
        assert (inside / "data" / "events.sqlite3").exists()
        client = bridge.client(timeout=5)
        create_session(client, "disk")
        create_session(client, "idle")
        seen: list[dict[str, Any]] = []
        reader_done = threading.Event()

        def reader() -> None:
            with (
                httpx.Client(base_url=bridge.url, timeout=30) as c,
                c.stream("GET", "/v1/sessions/disk/events/sse") as response,
            ):
                for event in iter_sse(response, time.monotonic() + 60):
                    seen.append(event)
                    if reader_done.is_set():
                        return

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        send(client, "disk", "Reply with exactly the single word OK.")
        assert wait_until(lambda: "turn.ended" in types(seen), 15)

        filler = _fill(inside)
        # A turn whose events cannot be written: they stream from memory, with one error event
        # naming the cause.
        response, took = _timed(lambda: client.post("/v1/sessions/disk/messages", json={"message": "burst 3000 64"}))
        assert response.status_code == 204, response.text
        assert took < 1
        assert wait_until(lambda: sum(1 for e in seen if e["type"] == "turn.ended") >= 2, 30), types(seen)[-5:]
        errors = [e["data"] for e in seen if e["type"] == "error"]
        assert [e["code"] for e in errors] == ["storage_unavailable"], errors
        assert "space" in errors[0]["message"] or "full" in errors[0]["message"]
        # Requests answer within a second: 503 with the cause for what would add events.
        for call in (
            lambda: client.post("/v1/sessions/disk/messages", json={"message": "again"}),
            lambda: client.post("/v1/sessions/new-one", json={"agent": "mock"}),
        ):
            response, took = _timed(call)
            assert took < 1
            assert response.status_code == 503, response.text
            problem = response.json()
            assert problem["status"] == 503 and problem["details"]["code"] == "storage_unavailable"
            assert "full" in problem["detail"] or "space" in problem["detail"]
        for path in ("/v1/health", "/v1/sessions", "/v1/sessions/disk/events?offset=0"):
            response, took = _timed(lambda path=path: client.get(path))
            assert response.status_code == 200 and took < 1, (path, took)
        # The count never claims more than GET /events serves.
        page = events(client, "disk")
        count = [s["eventCount"] for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "disk"]
        assert count == [len(page)]
        assert [e["sequence"] for e in page] == list(range(1, len(page) + 1))
        acknowledged = [e["sequence"] for e in seen]

        # Space returns: the same server writes the backlog in order and takes messages again.
        filler.unlink()
        assert wait_until(
            lambda: client.post("/v1/sessions/disk/messages", json={"message": "OK"}).status_code == 204, 10
        )
        assert wait_until(lambda: sum(1 for e in seen if e["type"] == "turn.ended") >= 3, 15)
        assert client.post("/v1/sessions/disk/terminate").status_code == 204
        reader_done.set()
        # An ended session keeps no events in memory: this page is read from the store, and
        # nothing that was shown is missing.
        stored = events(client, "disk")
        stored_by_seq = {e["sequence"]: e for e in stored}
        assert [e["sequence"] for e in stored] == list(range(1, len(stored) + 1))
        assert set(acknowledged) <= set(stored_by_seq)
        assert all(stored_by_seq[e["sequence"]] == e for e in seen)
    finally:
        bridge.stop()


# ---- kill -9 in a burst ----------------------------------------------------------------------------
def test_what_readers_saw_survives_kill_9_in_a_burst(tmp_path: Path) -> None:
    bridge = start_bridge(tmp_path)
    data_dir = bridge.data_dir
    received: list[list[dict[str, Any]]] = [[] for _ in range(5)]
    try:
        client = bridge.client()
        create_session(client, "burst")
        started = threading.Barrier(6)

        def reader(index: int) -> None:
            try:
                with (
                    httpx.Client(base_url=bridge.url, timeout=30) as c,
                    c.stream("GET", "/v1/sessions/burst/events/sse") as response,
                ):
                    started.wait(10)
                    for event in iter_sse(response, time.monotonic() + 60):
                        received[index].append(event)
            except (httpx.HTTPError, threading.BrokenBarrierError):
                pass  # cut by the kill

        threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(5)]
        for thread in threads:
            thread.start()
        started.wait(10)
        send(client, "burst", "burst 10000")
        assert wait_until(lambda: max(len(r) for r in received) > 3000, 30)
        bridge.proc.send_signal(signal.SIGKILL)
        bridge.proc.wait(10)
        for thread in threads:
            thread.join(10)
    finally:
        bridge.stop()
    seen = {e["sequence"]: e for r in received for e in r}
    assert len(seen) > 3000
    for r in received:  # each reader got a gap-free prefix
        assert [e["sequence"] for e in r] == list(range(1, len(r) + 1))

    again = start_bridge(tmp_path, data_dir=data_dir)
    try:
        client = again.client()
        stored = events(client, "burst")
        sequences = [e["sequence"] for e in stored]
        assert sequences == list(range(1, len(stored) + 1))
        by_seq = {e["sequence"]: e for e in stored}
        missing = sorted(set(seen) - set(by_seq))
        assert not missing, f"{len(missing)} events readers received are not stored: {missing[:5]}..."
        assert all(by_seq[s] == e for s, e in seen.items())
    finally:
        again.stop()
    # New events continue the sequence (the store, reopened directly).
    from app.events.log import SessionEventLog
    from app.events.model import ERROR, EventDraft
    from app.events.sqlite import SqliteBackend
    from app.events.writer import BatchWriter

    store = BatchWriter(SqliteBackend(data_dir))
    store.open()
    try:
        log = SessionEventLog("burst", store)
        event = log.append(EventDraft(ERROR, {"message": "after", "code": None, "details": None}))
        assert event is not None and event.sequence == len(stored) + 1
    finally:
        store.close()


# ---- retention -------------------------------------------------------------------------------------
def test_retention_deletes_old_ended_sessions_at_start(tmp_path: Path) -> None:
    bridge = start_bridge(tmp_path)
    try:
        client = bridge.client()
        create_session(client, "old")
        send(client, "old", "Reply with exactly the single word OK.")
        wait_for_events(client, "old", lambda evs: "turn.ended" in types(evs))
        assert client.post("/v1/sessions/old/terminate").status_code == 204
    finally:
        bridge.stop()
    ended_at = time.time()
    # 0.00003 days: 2.6 s.
    assert wait_until(lambda: time.time() - ended_at > 3, 5)
    again = start_bridge(tmp_path, env={"ACP_BRIDGE_RETENTION_DAYS": "0.00003"}, data_dir=bridge.data_dir)
    try:
        client = again.client()
        create_session(client, "young")
        assert client.post("/v1/sessions/young/terminate").status_code == 204
        # "young" ended just now: kept; "old" is past the retention period: gone.
        assert wait_until(
            lambda: {s["sessionId"] for s in client.get("/v1/sessions").json()["sessions"]} == {"young"}, 5
        )
        assert client.get("/v1/sessions/old/events").status_code == 404
        create_session(client, "old")  # the id is free again, its log starts anew
        assert events(client, "old")[0]["sequence"] == 1
    finally:
        again.stop()
    db = sqlite3.connect(bridge.data_dir / "events.sqlite3")
    try:
        ids = [row[0] for row in db.execute("SELECT id FROM sessions ORDER BY key")]
        counts = db.execute("SELECT count(*) FROM events JOIN sessions ON key = session_key WHERE id = 'old'")
        assert ids == ["young", "old"] and counts.fetchone()[0] >= 1
    finally:
        db.close()
