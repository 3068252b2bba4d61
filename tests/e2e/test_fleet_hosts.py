"""A fleet on separate hosts (network namespaces on one switch, ``tests/hosts.py``): two bridges, each
with its own address and its own disk mounted at the same path, on one PostgreSQL server.

Files follow the session: a request naming a session's id acts on the disk of the host whose bridge
runs it, relative paths against that session's directory, whichever bridge receives it; without one,
on the receiving host's disk. Webhooks outlive their bridge: a bridge killed with deliveries pending
leaves them to the other, which delivers each once when the receiver comes back."""

from __future__ import annotations

import io
import signal
import tarfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from app.webhooks.dispatcher import webhook_id
from tests.e2e.test_webhooks import SECRET, Receiver, selected
from tests.hosts import Host, Hosts, require
from tests.postgres import PostgresServer, remove_postgres, start_postgres
from tests.support import Bridge, create_session, events, send, start_bridge, until_type, wait_for_events, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.namespaces]

TOKEN = "hosts-token"
PORT = 2468  # every host has its own network: the same port on each


@dataclass
class Machine:
    host: Host
    disk: Path  # what the host has at WORKSPACE
    data: Path


@dataclass
class Site:
    hosts: Hosts
    postgres: PostgresServer
    workspace: Path  # the same path on every host, another disk on each
    tmp: Path

    def machine(self, name: str) -> Machine:
        host = next((h for h in self.hosts.hosts if h.name.endswith("-" + name)), None) or self.hosts.add(name)
        disk, data = self.tmp / f"{name}-disk", self.tmp / f"{name}-data"
        disk.mkdir(exist_ok=True)
        return Machine(host, disk, data)

    def bridge(self, machine: Machine, database_url: str, env: dict[str, str] | None = None) -> Bridge:
        url = f"http://{machine.host.address}:{PORT}"
        return start_bridge(
            self.tmp,
            "--host",
            machine.host.address,
            "--database-url",
            database_url.replace("127.0.0.1", self.hosts.gateway),
            "--advertise-url",
            url,
            token=TOKEN,
            port=PORT,
            data_dir=machine.data,
            cwd=self.workspace,
            wrapper=self.hosts.wrapper(machine.host, {machine.disk: self.workspace}),
            # Relative paths without a session resolve against $HOME: the host's disk too.
            env={"HOME": str(self.workspace), "ACP_BRIDGE_LEASE_SECONDS": "2", **(env or {})},
        )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    require()
    tmp = tmp_path_factory.mktemp("hosts")
    workspace = tmp / "workspace"
    workspace.mkdir()
    hosts = Hosts.create()
    try:
        postgres = start_postgres(listen=("127.0.0.1", hosts.gateway))
        try:
            yield Site(hosts, postgres, workspace, tmp)
        finally:
            remove_postgres(postgres)
    finally:
        hosts.close()


def tar_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_files_follow_the_session_to_the_host_that_runs_it(site: Site) -> None:
    database = site.postgres.new_database()
    ma, mb = site.machine("a"), site.machine("b")
    (ma.disk / "only-on-a.txt").write_text("a")
    (mb.disk / "only-on-b.txt").write_text("b")
    a, b = site.bridge(ma, database), site.bridge(mb, database)
    try:
        ca, cb = a.client(), b.client()
        create_session(ca, "files")
        ws = str(site.workspace)
        on_a = {"session_id": "files"}

        # Sent to B, naming A's session: A's disk, relative to the session's directory there.
        put = cb.put("/v1/fs/file", params={**on_a, "path": "notes.txt"}, content=b"written through B")
        assert put.status_code == 200, put.text
        assert put.json() == {"path": f"{ws}/notes.txt", "bytesWritten": 17}
        assert (ma.disk / "notes.txt").read_bytes() == b"written through B"
        assert not (mb.disk / "notes.txt").exists()
        got = cb.get("/v1/fs/file", params={**on_a, "path": "notes.txt"})
        assert got.status_code == 200 and got.content == b"written through B"
        listed = cb.get("/v1/fs/entries", params=on_a)
        assert listed.status_code == 200, listed.text
        assert {e["name"] for e in listed.json()} == {"only-on-a.txt", "notes.txt"}
        upload = cb.post(
            "/v1/fs/upload-batch",
            params={**on_a, "path": "up"},
            content=tar_of({"one.txt": b"1", "dir/two.txt": b"2"}),
            headers={"content-type": "application/x-tar"},
        )
        assert upload.status_code == 200, upload.text
        assert (ma.disk / "up" / "dir" / "two.txt").read_bytes() == b"2"
        assert not (mb.disk / "up").exists()
        # A large file both ways (streamed, not held by B), and the runner's limits apply.
        big = bytes(range(256)) * 6 * 1024  # 1.5 MiB
        assert cb.put("/v1/fs/file", params={**on_a, "path": "big.bin"}, content=big).status_code == 200
        assert cb.get("/v1/fs/file", params={**on_a, "path": "big.bin"}).content == big
        assert (ma.disk / "big.bin").read_bytes() == big
        too_big = cb.put("/v1/fs/file", params={**on_a, "path": "huge.bin"}, content=b"x" * (3 * 1024 * 1024))
        assert too_big.status_code == 413
        assert not (ma.disk / "huge.bin").exists() and not (mb.disk / "huge.bin").exists()
        for call, want in (
            (cb.post("/v1/fs/mkdir", params={**on_a, "path": "made"}), ma.disk / "made"),
            (cb.post("/v1/fs/move", params=on_a, json={"from": "up/one.txt", "to": "mv.txt"}), ma.disk / "mv.txt"),
        ):
            assert call.status_code == 200, call.text
            assert want.exists()
        stat = cb.get("/v1/fs/stat", params={**on_a, "path": "mv.txt"})
        assert stat.status_code == 200 and stat.json()["size"] == 1
        assert cb.delete("/v1/fs/entry", params={**on_a, "path": "mv.txt"}).status_code == 200
        assert not (ma.disk / "mv.txt").exists()
        # The agent, on A, sees what was written through B.
        send(cb, "files", "read notes.txt")
        seen = wait_for_events(cb, "files", until_type("turn.ended"))
        assert any("written through B" in str(e["data"]) for e in seen if e["type"] == "item.completed")

        # Without a session: the receiving bridge's own disk.
        mine = cb.put("/v1/fs/file", params={"path": "notes.txt"}, content=b"B's own")
        assert mine.status_code == 200 and mine.json()["path"] == f"{ws}/notes.txt"
        assert (mb.disk / "notes.txt").read_bytes() == b"B's own"
        assert (ma.disk / "notes.txt").read_bytes() == b"written through B"
        assert cb.get("/v1/fs/file", params={"path": "notes.txt"}).content == b"B's own"
        assert {e["name"] for e in cb.get("/v1/fs/entries").json()} == {"only-on-b.txt", "notes.txt"}
        upload = cb.post(
            "/v1/fs/upload-batch",
            params={"path": "up"},
            content=tar_of({"three.txt": b"3"}),
            headers={"content-type": "application/x-tar"},
        )
        assert upload.status_code == 200, upload.text
        assert (mb.disk / "up" / "three.txt").exists() and not (ma.disk / "up" / "three.txt").exists()
        # Sent to A itself, the same as through B.
        assert ca.get("/v1/fs/file", params={**on_a, "path": "notes.txt"}).content == b"written through B"
    finally:
        a.stop()
        b.stop()


def test_a_dead_bridges_webhooks_are_delivered_by_another(site: Site) -> None:
    database = site.postgres.new_database()
    receiver = Receiver(host=site.hosts.gateway)
    down = True
    receiver.answer = lambda _mid, _attempt: 503 if down else 200
    receiver.start()
    env = {"ACP_BRIDGE_WEBHOOK_URL": receiver.url, "ACP_BRIDGE_WEBHOOK_SECRET": SECRET}
    # A's failed tries wait long: only B delivers them.
    a = site.bridge(site.machine("a"), database, {**env, "ACP_BRIDGE_WEBHOOK_RETRY_DELAY": "120"})
    b = site.bridge(site.machine("b"), database, {**env, "ACP_BRIDGE_WEBHOOK_RETRY_DELAY": "0.2"})
    try:
        ca, cb = a.client(), b.client()
        create_session(ca, "wh-ended")
        send(ca, "wh-ended", "hello")
        wait_for_events(ca, "wh-ended", until_type("turn.ended"))
        assert ca.post("/v1/sessions/wh-ended/terminate").status_code == 204
        ended = selected(wait_for_events(ca, "wh-ended", until_type("session.ended")))
        create_session(ca, "wh-live")  # live on A when it dies; continued through B
        live_before = selected(events(ca, "wh-live"))

        def pending() -> int:
            with psycopg.connect(database) as conn:
                row = conn.execute("SELECT count(*) FROM webhook_deliveries WHERE failed IS NULL").fetchone()
            assert row is not None
            return int(row[0])

        assert wait_until(lambda: pending() == len(ended) + len(live_before), 20), pending()
        assert wait_until(lambda: len(receiver.received) >= 2, 20)  # each session's first try failed
        # As if A died between committing the last events and keeping them: found in the events.
        # (Before A dies: B takes over what A left as soon as it is gone.)
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(
                "DELETE FROM webhook_deliveries WHERE session_id = 'wh-ended' AND sequence >= %s", (ended[-2][1],)
            )
            conn.execute("UPDATE webhook_marks SET sequence = %s WHERE session_id = 'wh-ended'", (ended[-3][1],))
            conn.execute("DELETE FROM webhook_deliveries WHERE session_id = 'wh-live'")
            conn.execute("UPDATE webhook_marks SET sequence = 0 WHERE session_id = 'wh-live'")
        for client in a.clients:
            client.close()
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(10)
        down = False
        # The live session goes on through B, which takes it over.
        send(cb, "wh-live", "again")
        live = selected(wait_for_events(cb, "wh-live", until_type("turn.ended")))
        expected = {webhook_id("wh-ended", seq) for _, seq in ended} | {webhook_id("wh-live", seq) for _, seq in live}
        assert wait_until(lambda: {r.id for r in receiver.accepted()} >= expected, 30), (
            [(r.id, r.session_id, r.sequence, r.status) for r in receiver.received],
            expected,
            b.log()[-6000:],
        )
        accepted = Counter(r.id for r in receiver.accepted())
        assert set(accepted) == expected and set(accepted.values()) == {1}, accepted  # each once
        assert [(r.type, r.sequence) for r in receiver.accepted("wh-ended")] == ended  # in order
        assert receiver.rejected == []
        assert wait_until(lambda: pending() == 0, 10)
        assert "deliveries that a bridge which is gone left are delivered here" in b.log()
    finally:
        a.stop()
        b.stop()
        receiver.stop()
