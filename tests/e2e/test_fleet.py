"""A fleet: real bridge processes on one real PostgreSQL database (the tests start the server).

Any bridge lists every session and serves its events live; requests for the agent reach the bridge
that runs it; when that bridge is killed, the next message through another one continues the
session there, and the killed bridge, restarted, follows it and forwards to its new runner."""

from __future__ import annotations

import signal
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.postgres import PostgresServer
from tests.support import (
    Bridge,
    create_session,
    events,
    free_port,
    iter_sse,
    send,
    start_bridge,
    types,
    until_type,
    wait_until,
)
from tests.support import wait_for_events as follow

pytestmark = pytest.mark.postgres

TOKEN = "fleet-token"
LIST_FILES = "List files in the current directory using available tools."
BRIDGE = "sandbox-agent/bridge"
RESUME = "sandbox-agent/resume"


@dataclass
class Fleet:
    tmp: Path
    database_url: str
    bridges: list[Bridge]

    def start(
        self, name: str, port: int | None = None, *, token: str | None = TOKEN, advertise: str | None = None
    ) -> Bridge:
        port = port or free_port()
        home = self.tmp / name
        home.mkdir(exist_ok=True)
        # The mock agent keeps what it was told in the data dir: shared here, as if the bridges'
        # machines shared the agent's own memory, so an agent started on another bridge can load
        # the session (session/load).
        (home / "data").mkdir(mode=0o700, exist_ok=True)
        if not (home / "data" / "mock").exists():
            (self.tmp / "mock-state").mkdir(exist_ok=True)
            (home / "data" / "mock").symlink_to(self.tmp / "mock-state")
        bridge = start_bridge(
            home,
            "--database-url",
            self.database_url,
            "--advertise-url",
            advertise or f"http://127.0.0.1:{port}",
            token=token,
            port=port,
            data_dir=home / "data",
            env={
                "ACP_BRIDGE_LEASE_SECONDS": "2",
                "ACP_BRIDGE_LOG_LEVEL": "info",
            },
        )
        self.bridges.append(bridge)
        return bridge


@pytest.fixture
def fleet(tmp_path: Path, database_url: str) -> Iterator[Fleet]:
    group = Fleet(tmp_path, database_url, [])
    yield group
    for bridge in group.bridges:
        bridge.stop()


def info(client: httpx.Client, session_id: str) -> dict[str, Any]:
    listed = client.get("/v1/sessions").json()["sessions"]
    return next(s for s in listed if s["sessionId"] == session_id)


def runner(client: httpx.Client, session_id: str) -> str:
    url: str = info(client, session_id)["_meta"][BRIDGE]["url"]
    return url


def sound(evs: list[dict[str, Any]]) -> None:
    """No gap, no duplicate: sequences 1..n, every item started and completed once."""
    assert [e["sequence"] for e in evs] == list(range(1, len(evs) + 1))
    started = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.started")
    completed = Counter(e["data"]["item"]["item_id"] for e in evs if e["type"] == "item.completed")
    assert all(n == 1 for n in started.values()), started
    assert started == completed


def status_items(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for event in evs:
        item = event["data"].get("item") if event["type"] == "item.completed" else None
        if item and item["kind"] == "status" and item["content"][0].get("label") == "restart":
            meta = next(p["json"]["_meta"][RESUME] for p in item["content"] if p["type"] == "json")
            text = next(p["text"] for p in item["content"] if p["type"] == "text")
            out.append({**meta, "text": text})
    return out


class Reader(threading.Thread):
    """An SSE reader on one bridge, collecting every event until ``until`` holds."""

    def __init__(self, client: httpx.Client, session_id: str, until: Any) -> None:
        super().__init__(daemon=True)
        self.client, self.session_id, self.until = client, session_id, until
        self.seen: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.client.stream(
                "GET", f"/v1/sessions/{self.session_id}/events/sse", timeout=httpx.Timeout(60)
            ) as response:
                assert response.status_code == 200
                self.connected.set()
                for event in iter_sse(response):
                    self.seen.append(event)
                    if self.until(self.seen):
                        return
        except BaseException as exc:
            self.error = exc
            self.connected.set()


def test_two_bridges_serve_one_session(fleet: Fleet) -> None:
    a, b, c = fleet.start("a"), fleet.start("b"), fleet.start("c")
    ca, cb, cc = a.client(), b.client(), c.client()
    create_session(ca, "shared", permissionMode="plan")
    # B and C list it, run by A.
    assert runner(cb, "shared") == runner(cc, "shared") == runner(ca, "shared") == a.url
    # Its id is taken on every bridge.
    assert cb.post("/v1/sessions/shared", json={"agent": "mock"}).status_code == 409

    # A reader on B follows A's events live.
    # (The mock's permission turn ends asking, as legacy's did: the reply adds only its resolution.)
    reader = Reader(cb, "shared", until_type("permission.resolved"))
    reader.start()
    assert reader.connected.wait(10) and reader.error is None
    # A message sent to B reaches A's agent; its permission request is answered through B.
    send(cb, "shared", LIST_FILES)
    asked = follow(cb, "shared", until_type("permission.requested"))
    permission_id = next(e for e in asked if e["type"] == "permission.requested")["data"]["permission_id"]
    reply = cb.post(f"/v1/sessions/shared/permissions/{permission_id}/reply", json={"reply": "once"})
    assert reply.status_code == 204, reply.text
    reader.join(30)
    assert not reader.is_alive() and reader.error is None
    assert "permission.resolved" in types(reader.seen)

    # Every event is the same through A and B, and what B's reader got live is that history.
    through_a, through_b = events(ca, "shared"), events(cb, "shared")
    assert through_a == through_b == events(cc, "shared")
    sound(through_a)
    assert reader.seen == through_b[: len(reader.seen)]
    assert types(through_b)[-1] == "permission.resolved"

    # messages/stream through B streams A's turn.
    with cb.stream("POST", "/v1/sessions/shared/messages/stream", json={"message": "hello"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        streamed = []
        for event in iter_sse(response):
            streamed.append(event)
            if event["type"] == "turn.ended":
                break
    assert streamed == events(ca, "shared")[len(through_a) :]
    # A message sent to C reaches A's agent too; its questions are answered and declined through B.
    send(cc, "shared", "question")
    questions = follow(ca, "shared", until_type("question.requested", 2))
    reject, ask = sorted(
        (e["data"]["question_id"] for e in questions if e["type"] == "question.requested"),
        key=lambda q: not q.endswith("_reject"),
    )
    assert cb.post(f"/v1/sessions/shared/questions/{reject}/reject").status_code == 204
    answer = cb.post(f"/v1/sessions/shared/questions/{ask}/reply", json={"answers": [["Red"]]})
    assert answer.status_code == 204, answer.text
    asked = follow(cc, "shared", until_type("question.resolved", 2))
    assert {e["data"]["status"] for e in asked if e["type"] == "question.resolved"} == {"answered", "rejected"}
    # Terminate through B ends it on A.
    assert cb.post("/v1/sessions/shared/terminate").status_code == 204
    assert info(ca, "shared")["ended"] is True
    assert info(cb, "shared")["ended"] is True
    assert events(ca, "shared") == events(cb, "shared")


def test_a_session_outlives_its_bridge(fleet: Fleet) -> None:
    port_a = free_port()
    a, b = fleet.start("a", port_a), fleet.start("b")
    ca, cb = a.client(), b.client()
    create_session(ca, "lasting", permissionMode="plan")
    send(ca, "lasting", "first message")
    follow(cb, "lasting", until_type("turn.ended"))
    # Mid-turn: A's agent waits for a permission reply when A dies.
    send(ca, "lasting", LIST_FILES)
    before = follow(cb, "lasting", until_type("permission.requested"))
    assert events(cb, "lasting") == events(ca, "lasting") == before
    reader = Reader(cb, "lasting", until_type("turn.ended", 3))  # on B, across the take-over
    reader.start()
    assert reader.connected.wait(10) and reader.error is None

    # kill -9 of A: the next message through B continues the session on B.
    for client in a.clients:
        client.close()
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    # A reply to the permission A's agent asked: it died with A, and the answer says so (legacy's 400).
    permission_id = next(e for e in before if e["type"] == "permission.requested")["data"]["permission_id"]
    late = cb.post(f"/v1/sessions/lasting/permissions/{permission_id}/reply", json={"reply": "once"})
    assert late.status_code == 400, late.text
    assert "died with the session's agent on the bridge at " + a.url in late.json()["detail"]
    send(cb, "lasting", "second message")
    after = follow(cb, "lasting", until_type("turn.ended", 3))
    history = events(cb, "lasting")
    sound(history)
    assert history[: len(before)] == before  # nothing lost, nothing rewritten
    added = history[len(before) :]
    # What the dead agent left open is closed: its permission request, its turn.
    assert [e["data"]["status"] for e in added if e["type"] == "permission.resolved"] == ["reject"]
    assert next(e["data"]["metadata"]["stopReason"] for e in added if e["type"] == "turn.ended") == "error"
    (status,) = [s for s in status_items(history) if s["state"] == "restarted"]
    assert status["method"] == "session/load"
    assert status["bridge"] == b.url
    assert b.url in status["text"]
    assert runner(cb, "lasting") == b.url
    assert after[-1]["type"] == "turn.ended"
    # The reader on B followed A's events, then B's own, without a gap or a duplicate.
    reader.join(30)
    assert not reader.is_alive() and reader.error is None
    assert reader.seen == history[: len(reader.seen)]

    # A restarted: lists the session as running on B, adds nothing, forwards a message to B.
    a2 = fleet.start("a", port_a)
    ca2 = a2.client()
    assert runner(ca2, "lasting") == b.url
    assert events(ca2, "lasting") == events(cb, "lasting") == history
    send(ca2, "lasting", "third message")
    follow(ca2, "lasting", until_type("turn.ended", 4))
    final = events(cb, "lasting")
    sound(final)
    assert final[: len(history)] == history
    assert events(ca2, "lasting") == final
    assert sum(1 for s in status_items(final) if s["state"] == "restarted") == 1  # still on B, once
    assert "taken over from" in b.log() and "taken over from" not in a2.log()


def test_a_bridge_that_lost_its_lease_stops_its_agent_and_follows(fleet: Fleet) -> None:
    a = fleet.start("a")
    ca = a.client()
    create_session(ca, "moved")
    send(ca, "moved", "hello")
    before = follow(ca, "moved", until_type("turn.ended"))
    # As if another bridge had taken it over while A stalled (its lease ran out meanwhile).
    with psycopg.connect(fleet.database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE leases SET owner = 'http://127.0.0.1:9', expires = now() + interval '1 hour'"
            " WHERE session_id = 'moved'"
        )
    assert wait_until(lambda: runner(ca, "moved") == "http://127.0.0.1:9", 10), a.log()
    assert "another bridge holds its lease now" in a.log()
    assert events(ca, "moved") == before  # it wrote nothing more


def test_a_database_that_goes_away_loses_nothing_across_bridges(fleet: Fleet, postgres: PostgresServer) -> None:
    a, b = fleet.start("a"), fleet.start("b")
    ca, cb = a.client(), b.client()
    create_session(ca, "outage")
    send(ca, "outage", "before")
    follow(cb, "outage", until_type("turn.ended"))

    def after_the_outage(seen: list[dict[str, Any]]) -> bool:
        # The writer says so once it fails a commit, which may come after the turn's end.
        return len([e for e in seen if e["type"] == "turn.ended"]) >= 2 and any(
            e["type"] == "error" and e["data"].get("code") == "storage_unavailable" for e in seen
        )

    reader = Reader(cb, "outage", after_the_outage)
    reader.start()
    assert reader.connected.wait(10) and reader.error is None
    postgres.stop("immediate")
    try:
        send(ca, "outage", "during")  # the bridge takes it and shows its events from memory
        follow(ca, "outage", after_the_outage)
        assert "cannot write events to the database" in a.log()
    finally:
        postgres.start()
    # Back: A writes what waited, in order; B's reader gets all of it.
    reader.join(30)
    assert not reader.is_alive() and reader.error is None
    through_a = events(ca, "outage")
    assert wait_until(lambda: events(cb, "outage") == through_a, 10)
    sound(through_a)
    assert reader.seen == through_a


def test_a_bridge_restarted_at_once_goes_on_with_its_own_sessions(fleet: Fleet) -> None:
    port_a = free_port()
    a, b = fleet.start("a", port_a), fleet.start("b")
    ca = a.client()
    create_session(ca, "own")
    send(ca, "own", "first message")
    before = follow(ca, "own", until_type("turn.ended"))
    for client in a.clients:
        client.close()
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    # Back before its lease ran out: the session is its own again, as after any restart.
    a2 = fleet.start("a", port_a)
    ca2 = a2.client()
    assert runner(ca2, "own") == a2.url == runner(b.client(), "own")
    send(ca2, "own", "second message")
    history = follow(ca2, "own", until_type("turn.ended", 2))
    sound(history)
    assert history[: len(before)] == before
    (status,) = [s for s in status_items(history) if s["state"] == "restarted"]
    assert status["method"] == "session/load" and "bridge" not in status
    assert events(b.client(), "own") == events(ca2, "own")


def test_a_bridge_stopped_cleanly_hands_its_sessions_over_at_once(fleet: Fleet) -> None:
    a, b = fleet.start("a"), fleet.start("b")
    ca, cb = a.client(), b.client()
    create_session(ca, "handed")
    send(ca, "handed", "first message")
    follow(cb, "handed", until_type("turn.ended"))
    a.stop()  # SIGTERM: its leases end as it stops
    with psycopg.connect(fleet.database_url) as conn:
        row = conn.execute("SELECT expires > now() FROM leases WHERE session_id = 'handed'").fetchone()
    assert row is not None
    (valid,) = row
    assert valid is False
    send(cb, "handed", "second message")
    history = follow(cb, "handed", until_type("turn.ended", 2))
    sound(history)
    (status,) = [s for s in status_items(history) if s["state"] == "restarted"]
    assert status["cause"] == "shutdown" and status["bridge"] == b.url
    assert "cannot be reached" not in b.log()  # nothing to wait for


def raw_post(url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, str]:
    """A POST whose path goes on the wire exactly as written (no client folds its dot segments)."""
    import http.client
    import json

    parsed = httpx.URL(url)
    conn = http.client.HTTPConnection(parsed.host, parsed.port, timeout=20)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_a_session_named_dot_is_messaged_through_another_bridge(fleet: Fleet) -> None:
    a, b = fleet.start("a", token=None), fleet.start("b", token=None)
    assert raw_post(a.url, "/v1/sessions/.", {"agent": "mock"})[0] == 200
    status, text = raw_post(b.url, "/v1/sessions/./messages", {"message": "hello"})
    assert status == 204, text
    ca = a.client()
    assert types(follow(ca, "%2E", until_type("turn.ended")))[-1] == "turn.ended"
    # ... and nothing became a session named "messages".
    assert "messages" not in {s["sessionId"] for s in ca.get("/v1/sessions").json()["sessions"]}


def test_the_inspector_works_through_another_bridge_without_a_token(fleet: Fleet) -> None:
    a, b = fleet.start("a", token=None), fleet.start("b", token=None)
    ca, cb = a.client(), b.client()
    create_session(ca, "seen")
    # What a page served by B (the inspector) sends: its Origin is B's, which A never served.
    page = {"origin": b.url, "sec-fetch-site": "same-origin"}
    sent = cb.post("/v1/sessions/seen/messages", json={"message": "hello"}, headers=page)
    assert sent.status_code == 204, sent.text
    follow(cb, "seen", until_type("turn.ended"))
    # Another site's page is still refused, by the bridge it reached.
    foreign = cb.post("/v1/sessions/seen/messages", json={"message": "x"}, headers={"origin": "http://evil.test"})
    assert foreign.status_code == 403


def test_bridges_with_another_token_or_the_same_address_refuse_to_start(fleet: Fleet) -> None:
    port_a = free_port()
    a = fleet.start("a", port_a)
    with pytest.raises(RuntimeError, match=f"the bridge at {a.url} on this database has another token"):
        fleet.start("b", token="another-token")
    with pytest.raises(RuntimeError, match="has a token and this one has none"):
        fleet.start("c", token=None)
    with pytest.raises(RuntimeError, match=rf"another bridge on this machine \(pid {a.proc.pid}\) already advertises"):
        fleet.start("d", advertise=a.url)
    # Nothing of theirs is registered: A alone is, and serves.
    with psycopg.connect(fleet.database_url) as conn:
        rows = conn.execute("SELECT url FROM bridges WHERE expires > now()").fetchall()
    assert rows == [(a.url,)]
    assert a.client().get("/v1/sessions").status_code == 200


def test_requests_are_forwarded_only_to_an_advertised_address(fleet: Fleet) -> None:
    a, b = fleet.start("a"), fleet.start("b")
    create_session(a.client(), "pinned")
    with psycopg.connect(fleet.database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE leases SET owner = 'http://127.0.0.1:9/steal?x=', expires = now() + interval '1 hour'"
            " WHERE session_id = 'pinned'"
        )
    sent = b.client().post("/v1/sessions/pinned/messages", json={"message": "hello"})
    assert sent.status_code == 502, sent.text
    assert "an address no bridge of the fleet advertised" in sent.text
    assert "which no bridge advertised; not forwarded" in b.log()


def test_a_missing_data_dir_is_made_with_a_database_and_webhooks(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "not" / "yet"
    port = free_port()
    env = {"ACP_BRIDGE_WEBHOOK_URL": "http://127.0.0.1:9/hook", "ACP_BRIDGE_WEBHOOK_SECRET": "whsec_" + "A" * 44}
    bridge = start_bridge(
        tmp_path,
        "--database-url",
        database_url,
        "--advertise-url",
        f"http://127.0.0.1:{port}",
        port=port,
        data_dir=data,
        env=env,
    )
    try:
        assert data.is_dir() and data.stat().st_mode & 0o777 == 0o700
        create_session(bridge.client(), "made")
    finally:
        bridge.stop()


def test_an_address_registered_on_another_machine_is_watched_until_it_expires(fleet: Fleet) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    register = (
        "INSERT INTO bridges (url, instance, host, pid, token, expires) VALUES (%s, 'other', 'elsewhere boot ns', 7,"
        " %s, now() + interval '2 seconds') ON CONFLICT (url) DO UPDATE SET expires = EXCLUDED.expires"
    )
    from app.sessions.fleet import token_digest

    with psycopg.connect(fleet.database_url, autocommit=True) as conn:
        fleet.start("first", free_port())  # (the schema)
        conn.execute(register, (url, token_digest(TOKEN)))
        # Renewed meanwhile: a live bridge there has the address.
        stop = threading.Event()

        def renew() -> None:
            with psycopg.connect(fleet.database_url, autocommit=True) as renewing:
                while not stop.wait(0.5):
                    renewing.execute(register, (url, token_digest(TOKEN)))

        renewer = threading.Thread(target=renew, daemon=True)
        renewer.start()
        try:
            with pytest.raises(RuntimeError, match=rf"a live bridge on elsewhere \(pid 7\) already advertises {url}"):
                fleet.start("second", port)
        finally:
            stop.set()
            renewer.join(10)
        # Not renewed: it was this address's bridge before a crash; the new one starts once it expired.
        conn.execute(register, (url, token_digest(TOKEN)))
        bridge = fleet.start("second", port)
        assert "waiting to see whether it is alive" in bridge.log()
        row = conn.execute("SELECT instance, host FROM bridges WHERE url = %s", (url,)).fetchone()
        assert row is not None and row[0] != "other" and row[1] != "elsewhere boot ns"
