"""SIGTERM (`docker stop`, a service manager) and Ctrl-C (SIGINT) stop a real server cleanly: its
agents ended, every event it showed on disk, no traceback, and exit status 0."""

from __future__ import annotations

import signal
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.support import (
    create_session,
    descendants,
    events,
    pid_alive,
    send,
    start_bridge,
    until_type,
    wait_for_events,
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_cleanly_with_status_0(tmp_path: Path, sig: signal.Signals) -> None:
    data = tmp_path / "data"
    bridge = start_bridge(tmp_path, data_dir=data)
    try:
        client = bridge.client()
        create_session(client, "stopped")
        send(client, "stopped", "Reply with exactly the single word OK.")
        wait_for_events(client, "stopped", until_type("turn.ended"))
        shown = len(events(client, "stopped"))
        agents = descendants(bridge.proc.pid)
        assert agents, "the mock agent runs as a child of the server"
        bridge.proc.send_signal(sig)
        assert bridge.proc.wait(20) == 0, bridge.log()
    finally:
        bridge.stop()
    log = bridge.log()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    assert not [pid for pid in agents if pid_alive(pid)]
    with closing(sqlite3.connect(f"file:{data / 'events.sqlite3'}?mode=ro", uri=True)) as db:
        (stored,) = db.execute("SELECT count(*) FROM events").fetchone()
    assert stored >= shown
    # The next server on the data dir finds the session, every event of it, and nothing to recover.
    again = start_bridge(tmp_path, data_dir=data)
    try:
        assert len(events(again.client(), "stopped")) >= shown
    finally:
        again.stop()
