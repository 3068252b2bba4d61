"""The legacy SDK's spawn mode: `SandboxAgent.start` runs `<bin> server --host 127.0.0.1 --port P
--token T` with the user's HOME and nothing else. Servers started so run side by side, each run
starts with no sessions, and nothing of a run is left behind; a server that cannot start says why in
one line on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ExitedError, started_url, wait_until

BIN = Path(sys.executable).with_name("acp-rest-bridge")


class Spawned:
    def __init__(self, home: Path, tmp: Path, port: int = 0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_BRIDGE_") and k != "XDG_CACHE_HOME"}
        env |= {"HOME": str(home), "TMPDIR": str(tmp)}
        argv = [str(BIN), "server", "--host", "127.0.0.1", "--port", str(port), "--token", "T"]
        # stderr (the start-up line names the port bound) beside HOME and TMPDIR, not in them.
        log_fd, log_name = tempfile.mkstemp(prefix="spawned-", suffix=".log", dir=home.parent)
        self.log_path = Path(log_name)
        with os.fdopen(log_fd, "wb") as log:
            self.proc = subprocess.Popen(argv, env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=log)
        try:
            self.url = started_url(self.proc, self.log, 30)
        except RuntimeError as exc:
            raise AssertionError(self.log()) from exc
        self.port = int(self.url.rsplit(":", 1)[1])
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": "Bearer T"}, timeout=20)

        def healthy() -> bool:
            try:
                return self.client.get("/v1/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            assert wait_until(healthy, 30, while_running=self.proc, interval=0.05), "not healthy within 30 s"
        except ExitedError as exc:
            raise AssertionError(self.log()) from exc

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> str:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(15)
        return self.log()


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[list[Spawned]]:
    servers: list[Spawned] = []
    yield servers
    for server in servers:
        server.stop()


def test_parallel_spawned_servers_and_a_restart(spawned: list[Spawned], tmp_path: Path) -> None:
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: install the project (pip install -e .)")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    first, second = Spawned(home, tmp), Spawned(home, tmp)
    spawned += [first, second]
    for server in (first, second):
        created = server.client.post("/v1/sessions/s1", json={"agent": "mock"})
        assert created.status_code == 200, created.text
        sent = server.client.post("/v1/sessions/s1/messages", json={"message": "hello"})
        assert sent.status_code == 204, sent.text
    assert len(list(tmp.iterdir())) == 2  # one private data dir each

    log = first.stop()
    assert "data dir" in log and "auth on" in log, log
    restarted = Spawned(home, tmp, first.port)  # the same command line again
    spawned.append(restarted)
    assert restarted.client.get("/v1/sessions").json() == {"sessions": []}
    again = restarted.client.post("/v1/sessions/s1", json={"agent": "mock"})
    assert again.status_code == 200, again.text

    for server in (second, restarted):
        server.stop()
    assert list(tmp.iterdir()) == []  # the private data dirs are gone
    assert not (home / ".local" / "share" / "acp-rest-bridge").exists()


def test_a_server_that_cannot_start_says_why_in_one_line(spawned: list[Spawned], tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    running = Spawned(home, tmp)
    spawned.append(running)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
    cases = [
        (["--port", str(running.port)], {}, "cannot listen on 127.0.0.1:"),
        ([], {"ACP_BRIDGE_PORT": "many"}, "ACP_BRIDGE_PORT"),
    ]
    for args, extra, reason in cases:
        result = subprocess.run(
            [str(BIN), "server", "--host", "127.0.0.1", *args],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("acp-rest-bridge: ") and reason in lines[0], result.stderr
    assert len(list(tmp.iterdir())) == 1  # only the running server's
