"""Webhooks from a real server with the real mock agent to a receiver on 127.0.0.1 that verifies every
signature with the standardwebhooks library: every selected event of a session in order; retries
with the same webhook-id; failures given up and counted; and a kill -9 of the bridge with deliveries
pending loses none of them."""

from __future__ import annotations

import base64
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from app.webhooks.dispatcher import webhook_id
from tests.e2e.hitl_support import reply_permission, wait_count
from tests.support import create_session, events, free_port, send, start_bridge, until_type, wait_for_events, wait_until

SECRET = "whsec_" + base64.b64encode(b"a test secret of 32 bytes, fixed").decode()
SELECTED = ("session.started", "session.ended", "turn.ended", "permission.requested", "question.requested", "error")


@dataclass
class Received:
    id: str
    type: str
    session_id: str
    sequence: int
    status: int
    body: dict[str, Any]


@dataclass
class Receiver:
    """An HTTP server that verifies each webhook and answers ``answer(webhook_id, attempt)``."""

    answer: Callable[[str, int], int] = lambda _id, _attempt: 200
    host: str = "127.0.0.1"
    received: list[Received] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # bodies whose signature did not verify
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        receiver = self
        verifier = Webhook(SECRET)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = verifier.verify(body, dict(self.headers))
                except Exception:
                    receiver.rejected.append(body.decode())
                    self.send_response(400)
                    self.end_headers()
                    return
                with receiver.lock:
                    mid = self.headers["webhook-id"]
                    attempt = sum(1 for r in receiver.received if r.id == mid) + 1
                    status = receiver.answer(mid, attempt)
                    data = payload["data"]
                    assert payload["type"] == data["type"]
                    receiver.received.append(
                        Received(mid, data["type"], data["session_id"], data["sequence"], status, payload)
                    )
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((self.host, 0), Handler)
        self.url = f"http://{self.host}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def accepted(self, session_id: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.status == 200 and session_id in (None, r.session_id)]

    def ids(self) -> list[str]:
        with self.lock:
            return [r.id for r in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()


def hook_env(receiver: Receiver, **more: str) -> dict[str, str]:
    env = {"ACP_BRIDGE_WEBHOOK_URL": receiver.url, "ACP_BRIDGE_WEBHOOK_SECRET": SECRET}
    env.update({f"ACP_BRIDGE_WEBHOOK_{k.upper()}": v for k, v in more.items()})
    return env


def selected(evs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(e["type"], e["sequence"]) for e in evs if e["type"] in SELECTED]


def run_session(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    """A session with a turn that asks two permissions, and its end; its events."""
    create_session(client, sid)
    send(client, sid, "permission")
    wait_count(client, sid, "permission.requested", 2)
    assert reply_permission(client, sid, "mock_1_permission", "once").status_code == 204
    assert reply_permission(client, sid, "mock_1_permission_denied", "reject").status_code == 204
    wait_count(client, sid, "permission.resolved", 2)
    # The mock's permission turn ends asking, as legacy's did (no turn.ended); a second turn ends.
    send(client, sid, "echo done")
    wait_for_events(client, sid, until_type("turn.ended"))
    assert client.post(f"/v1/sessions/{sid}/terminate").status_code == 204
    return wait_for_events(client, sid, until_type("session.ended"))


def metric(client: httpx.Client, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def test_every_selected_event_of_a_session_in_order(tmp_path: Path, receiver: Receiver) -> None:
    bridge = start_bridge(tmp_path, env=hook_env(receiver))
    try:
        client = bridge.client()
        evs = run_session(client, "wh-order")
        want = selected(evs)
        assert [t for t, _ in want] == [
            "session.started",
            "permission.requested",
            "permission.requested",
            "turn.ended",
            "session.ended",
        ]
        assert wait_until(lambda: len(receiver.accepted()) >= len(want), 20), receiver.received
        got = receiver.accepted()
        assert [(r.type, r.sequence) for r in got] == want  # every one, in order, once
        assert [r.id for r in got] == [webhook_id("wh-order", seq) for _, seq in want]
        assert receiver.rejected == []
        assert metric(client, "acp_bridge_webhook_deliveries_total", outcome="delivered") == len(want)
        assert metric(client, "acp_bridge_webhook_queue_depth") == 0
    finally:
        bridge.stop()


def test_a_failing_receiver_gets_the_same_id_again_until_it_accepts(tmp_path: Path, receiver: Receiver) -> None:
    first = webhook_id("wh-retry", 1)  # session.started
    receiver.answer = lambda mid, attempt: 500 if mid == first and attempt <= 2 else 200
    bridge = start_bridge(tmp_path, env=hook_env(receiver, retry_delay="0.2"))
    try:
        client = bridge.client()
        evs = run_session(client, "wh-retry")
        want = selected(evs)
        assert wait_until(lambda: len(receiver.accepted()) >= len(want), 30), receiver.received
        # The session's later events waited for the first one: still in order, once each.
        assert [(r.type, r.sequence) for r in receiver.accepted()] == want
        assert receiver.ids().count(first) == 3
        assert receiver.ids()[:3] == [first] * 3
        assert [r.status for r in receiver.received[:3]] == [500, 500, 200]
        assert metric(client, "acp_bridge_webhook_deliveries_total", outcome="retried") == 2
        # Nothing more comes: the outbox is empty.
        with closing(sqlite3.connect(bridge.data_dir / "webhooks.sqlite3")) as db:
            assert db.execute("SELECT count(*) FROM deliveries").fetchone() == (0,)
        assert receiver.ids().count(first) == 3
    finally:
        bridge.stop()


def test_a_delivery_that_keeps_failing_is_given_up_counted_and_logged(tmp_path: Path, receiver: Receiver) -> None:
    receiver.answer = lambda mid, attempt: 503 if mid == webhook_id("wh-fail", 1) else 200
    bridge = start_bridge(tmp_path, env=hook_env(receiver, retry_delay="0.05", attempts="3"))
    try:
        client = bridge.client()
        create_session(client, "wh-fail")
        assert client.post("/v1/sessions/wh-fail/terminate").status_code == 204
        assert wait_until(lambda: len(receiver.accepted()) >= 1, 20)  # session.ended, after the failure
        assert receiver.ids().count(webhook_id("wh-fail", 1)) == 3
        # Counted once the bridge has read the answer, a moment after the receiver sent it.
        delivered = lambda: metric(client, "acp_bridge_webhook_deliveries_total", outcome="delivered")  # noqa: E731
        assert wait_until(lambda: delivered() >= 1, 10)
        assert metric(client, "acp_bridge_webhook_deliveries_total", outcome="failed") == 1
        assert delivered() == 1
        assert wait_until(lambda: "failed after 3 tries" in bridge.log(), 5), bridge.log()
        # At warning, so a failing receiver shows at the default log level.
        (given_up,) = [line for line in bridge.log().splitlines() if "failed after 3 tries" in line]
        assert given_up.startswith("WARNING ") and "acp_rest_bridge.webhooks" in given_up, given_up
        with closing(sqlite3.connect(bridge.data_dir / "webhooks.sqlite3")) as db:
            rows = db.execute("SELECT sequence, failed FROM deliveries").fetchall()
        assert rows == [(1, "HTTP 503")]
    finally:
        bridge.stop()


def test_kill_9_with_deliveries_pending_loses_none(tmp_path: Path, receiver: Receiver) -> None:
    down = True
    receiver.answer = lambda _mid, _attempt: 503 if down else 200
    data = tmp_path / "data"
    env = hook_env(receiver, retry_delay="60")  # the pending ones wait long: only a restart delivers them
    bridge = start_bridge(tmp_path, env=env, data_dir=data)
    try:
        client = bridge.client()
        want = selected(run_session(client, "wh-kill"))
        create_session(client, "wh-kill-2")  # live when the bridge dies
        want2 = selected(events(client, "wh-kill-2"))
        outbox = data / "webhooks.sqlite3"

        def pending() -> int:
            try:
                with closing(sqlite3.connect(f"file:{outbox}?mode=ro", uri=True, timeout=1)) as db:
                    return int(db.execute("SELECT count(*) FROM deliveries WHERE failed IS NULL").fetchone()[0])
            except sqlite3.Error:
                return -1

        assert wait_until(lambda: pending() == len(want) + len(want2), 20), pending()
        assert wait_until(lambda: len(receiver.received) >= 2, 20)  # each session's first try failed
        for c in bridge.clients:
            c.close()
        bridge.proc.send_signal(signal.SIGKILL)
        bridge.proc.wait(10)
    finally:
        bridge.stop()

    # As if the bridge had died between committing the session's last events and keeping them in
    # the outbox: the next server finds them in the event store.
    with closing(sqlite3.connect(outbox)) as db, db:
        db.execute("DELETE FROM deliveries WHERE session_id = 'wh-kill' AND sequence >= ?", (want[-2][1],))
        db.execute("UPDATE marks SET sequence = ? WHERE session_id = 'wh-kill'", (want[-3][1],))
    down = False
    again = start_bridge(tmp_path, env=env, data_dir=data)
    try:
        expected = len(want) + len(want2)
        assert wait_until(lambda: len(receiver.accepted()) >= expected, 30), receiver.received
        got = receiver.accepted("wh-kill")
        assert [(r.type, r.sequence) for r in got] == want
        assert [r.id for r in got] == [webhook_id("wh-kill", seq) for _, seq in want]
        assert [(r.type, r.sequence) for r in receiver.accepted("wh-kill-2")][: len(want2)] == want2
        assert receiver.rejected == []
        assert wait_until(lambda: pending() == 0, 10)
    finally:
        again.stop()


def test_webhook_settings_without_a_secret_stop_the_server(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="WEBHOOK_SECRET"):
        start_bridge(tmp_path, env={"ACP_BRIDGE_WEBHOOK_URL": "http://127.0.0.1:9/hook"})


def test_the_body_is_the_event_as_the_api_shows_it(tmp_path: Path, receiver: Receiver) -> None:
    bridge = start_bridge(tmp_path, env=hook_env(receiver, events="session.started"))
    try:
        client = bridge.client()
        create_session(client, "wh-body")
        assert client.post("/v1/sessions/wh-body/terminate").status_code == 204
        assert wait_until(lambda: len(receiver.accepted()) == 1, 20)
        first = events(client, "wh-body")[0]
        body = receiver.accepted()[0].body
        assert body["type"] == "session.started"
        assert body["data"] == first
        assert body["timestamp"].endswith("Z")
        assert len(receiver.received) == 1  # session.ended is not selected
    finally:
        bridge.stop()


def readme_receiver() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    marker = text.index("<!-- webhook receiver:")
    start = text.index("```python\n", marker) + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_readme_receiver_verifies_and_prints_every_event(tmp_path: Path) -> None:
    code = readme_receiver()
    assert len(code.strip().splitlines()) <= 10
    (tmp_path / "receiver.py").write_text(code)
    port = free_port()
    out = tmp_path / "receiver.out"
    env = {**os.environ, "ACP_BRIDGE_WEBHOOK_SECRET": SECRET, "PORT": str(port)}
    with open(out, "wb") as sink:
        receiver = subprocess.Popen([sys.executable, str(tmp_path / "receiver.py")], stdout=sink, stderr=sink, env=env)
    try:
        up = wait_until(lambda: _listening(port), 10)
        assert up, out.read_text()
        bridge = start_bridge(
            tmp_path,
            env={"ACP_BRIDGE_WEBHOOK_URL": f"http://127.0.0.1:{port}/", "ACP_BRIDGE_WEBHOOK_SECRET": SECRET},
        )
        try:
            client = bridge.client()
            want = selected(run_session(client, "wh-readme"))
            lines = lambda: [line.split() for line in out.read_text().splitlines() if line.startswith("msg_")]  # noqa: E731
            assert wait_until(lambda: len(lines()) >= len(want), 20), out.read_text()
            assert lines() == [[webhook_id("wh-readme", seq), t, str(seq)] for t, seq in want]
        finally:
            bridge.stop()
    finally:
        receiver.terminate()
        receiver.wait(5)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_slow_receiver_does_not_slow_the_session(tmp_path: Path, receiver: Receiver) -> None:
    release = threading.Event()

    def slow(_mid: str, _attempt: int) -> int:
        release.wait(20)  # holds every delivery until the session is done
        return 200

    receiver.answer = slow
    bridge = start_bridge(tmp_path, env=hook_env(receiver, timeout="30"))
    try:
        client = bridge.client()
        started = time.monotonic()
        want = selected(run_session(client, "wh-slow"))
        assert time.monotonic() - started < 10
        assert receiver.received == []  # the first delivery is still being answered
        release.set()
        assert wait_until(lambda: len(receiver.accepted()) >= len(want), 20), receiver.received
        assert [(r.type, r.sequence) for r in receiver.accepted()] == want
    finally:
        release.set()
        bridge.stop()


class Trickler:
    """A receiver that reads a request whole, then answers one byte every ``every`` seconds; it
    records how long each connection stayed open."""

    def __init__(self, every: float = 3.0) -> None:
        self.every = every
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[float] = []  # seconds each connection was held, once closed
        self.requests = 0
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        started = time.monotonic()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(
                int(v)
                for k, v in (line.split(b":", 1) for line in head.split(b"\r\n")[1:])
                if k.lower() == b"content-length"
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requests += 1
            answer = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 100
            try:
                for byte in answer:
                    conn.sendall(bytes([byte]))
                    # Until the next byte is due: the bridge closing the connection ends it.
                    readable, _, _ = select.select([conn], [], [], self.every)
                    if self.stopped.is_set() or (readable and not conn.recv(1)):
                        return
            except OSError:
                pass  # the bridge gave up the try: what is measured
            finally:
                self.held.append(time.monotonic() - started)

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()


def test_a_trickling_receiver_delays_only_its_own_deliveries(tmp_path: Path, receiver: Receiver) -> None:
    trickler = Trickler(every=1.0)  # each byte within the timeout, the whole answer in 100 s
    # Its URL carries credentials and a query: neither may reach a log line.
    slow = f"http://hook-user:pw-secret@127.0.0.1:{trickler.port}/slow?key=query-secret"
    env = hook_env(receiver, timeout="3", retry_delay="30", events="session.started")
    env["ACP_BRIDGE_WEBHOOK_URL"] = f"{slow},{receiver.url}"
    bridge = start_bridge(tmp_path, env=env)
    try:
        client = bridge.client()
        count = 12  # more than the posts one URL may have in flight
        started = time.monotonic()
        for n in range(count):
            create_session(client, f"wh-trickle-{n}")
        # The other URL gets every event within seconds, whatever the first one does.
        assert wait_until(lambda: len(receiver.accepted()) == count, 10), receiver.received
        assert time.monotonic() - started < 10
        # Each try at the trickler ends at the timeout (3 s), not when its answer would (100 s).
        assert wait_until(lambda: len(trickler.held) >= 8, 20), trickler.held
        assert max(trickler.held) < 5, trickler.held
        assert wait_until(lambda: "no whole answer within 3 s" in bridge.log(), 10), bridge.log()
        log_text = bridge.log()
        assert "pw-secret" not in log_text and "query-secret" not in log_text and "hook-user" not in log_text
        assert f"http://***@127.0.0.1:{trickler.port}/slow?***" in log_text
        # Failures are said at warning, at most one line a minute per URL.
        assert log_text.count("/slow?***: try 1 of") == 1, log_text
        (tried,) = [line for line in log_text.splitlines() if "/slow?***: try 1 of" in line]
        assert tried.startswith("WARNING "), tried
    finally:
        bridge.stop()
        trickler.stop()


def test_failed_deliveries_are_pruned_after_their_retention(tmp_path: Path, receiver: Receiver) -> None:
    data = tmp_path / "data"
    bridge = start_bridge(tmp_path, env=hook_env(receiver), data_dir=data)
    bridge.stop()
    day = 86400
    with closing(sqlite3.connect(data / "webhooks.sqlite3")) as db, db:
        for sequence, age in ((1, 8 * day), (2, 6 * day)):
            db.execute(
                "INSERT INTO deliveries (endpoint, session_id, sequence, event_type, payload, attempts, failed,"
                " failed_at) VALUES (?, 'old', ?, 'turn.ended', '{}', 10, 'HTTP 500', ?)",
                (receiver.url, sequence, time.time() - age),
            )
    again = start_bridge(tmp_path, env=hook_env(receiver), data_dir=data)  # retention: 7 days by default
    try:

        def left() -> list[int]:
            with closing(sqlite3.connect(f"file:{data / 'webhooks.sqlite3'}?mode=ro", uri=True)) as db:
                return [row[0] for row in db.execute("SELECT sequence FROM deliveries ORDER BY sequence")]

        assert wait_until(lambda: left() == [2], 10), left()
        assert receiver.received == []  # a failed delivery is never tried again
    finally:
        again.stop()
