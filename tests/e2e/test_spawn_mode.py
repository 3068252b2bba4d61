"""The legacy SDK's spawn mode: `SandboxAgent.start` runs `<bin> server --host 127.0.0.1 --port P
--token T` with the user's HOME and nothing else. Servers started so run side by side, each run
starts with no sessions, and nothing of a run is left behind; a server that cannot start says why in
one line on stderr. From Node, as the SDK looks for its binary (tests/probes/sdk_spawn.mjs):
`SANDBOX_AGENT_BIN` finds the bridge even where the legacy CLI package is installed, and the
package's `sandbox-agent` command is found on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import PROBES, ExitedError, free_port, started_url, wait_until

BIN = Path(sys.executable).with_name("acp-rest-bridge")
SANDBOX_AGENT = Path(sys.executable).with_name("sandbox-agent")


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


# ---- from Node, as the legacy SDK finds and starts its binary ------------------------------------
def legacy_cli(project: Path, marker: Path) -> Path:
    """A stand-in for the legacy CLI's platform package in ``project``'s node_modules (and its binary):
    it only records that it was started."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    package = project / "node_modules" / "@sandbox-agent" / f"cli-linux-{arch}"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": f"@sandbox-agent/cli-linux-{arch}", "version": "0.1.12"}))
    binary = package / "bin" / "sandbox-agent"
    binary.write_text(f"#!/bin/sh\necho legacy > {marker}\nexit 1\n")
    binary.chmod(0o755)
    return binary


def sdk_start(project: Path, env: dict[str, str]) -> dict[str, object]:
    result = subprocess.run(
        ["node", str(PROBES / "sdk_spawn.mjs"), str(free_port()), "T"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def sdk_env(tmp: Path, **extra: str) -> dict[str, str]:
    (tmp / "home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_BRIDGE_", "SANDBOX_AGENT_"))}
    return env | {"HOME": str(tmp / "home"), "TMPDIR": str(tmp), **extra}


@pytest.mark.usefixtures("npm")  # node runs the SDK
def test_sandbox_agent_bin_finds_the_bridge_before_the_legacy_cli(tmp_path: Path) -> None:
    project, marker = tmp_path / "project", tmp_path / "legacy-started"
    legacy = legacy_cli(project, marker)
    answer = sdk_start(project, sdk_env(tmp_path, SANDBOX_AGENT_BIN=str(BIN)))
    assert answer["binary"] == str(BIN)
    assert answer["created"] == {"status": 200, "body": {"healthy": True, "nativeSessionId": "mock-sdk"}}
    assert answer["exit"] in ({"code": 0, "signal": None}, {"code": None, "signal": "SIGTERM"})
    assert not marker.exists()
    # Without the variable the SDK starts the legacy CLI it finds beside it (docs/migration.md says so).
    assert sdk_start(project, sdk_env(tmp_path))["binary"] == str(legacy)
    assert marker.exists()


@pytest.mark.usefixtures("npm")
def test_the_sandbox_agent_command_on_path_is_the_bridge(tmp_path: Path) -> None:
    if not SANDBOX_AGENT.exists():
        pytest.fail(f"{SANDBOX_AGENT} is missing: install the project (pip install -e .)")
    project = tmp_path / "project"
    project.mkdir()
    env = sdk_env(tmp_path, PATH=f"{SANDBOX_AGENT.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    answer = sdk_start(project, env)
    assert answer["binary"] == str(SANDBOX_AGENT)
    assert answer["created"] == {"status": 200, "body": {"healthy": True, "nativeSessionId": "mock-sdk"}}
    version = subprocess.run([str(SANDBOX_AGENT), "--version"], capture_output=True, text=True, check=True, timeout=30)
    assert version.stdout.startswith("acp-rest-bridge ")
