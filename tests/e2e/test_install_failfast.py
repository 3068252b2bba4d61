"""An install that cannot succeed fails fast and readably, and never holds the server up: an
unreachable registry answers within 60 s with npm's own error lines; SIGTERM during an install
exits within 5 s, npm's process group killed and the partial install removed."""

from __future__ import annotations

import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import Bridge, refused_port, start_bridge, wait_until

pytestmark = pytest.mark.usefixtures("npm")


def npm_env(tmp_path: Path, registry: str) -> dict[str, str]:
    npm = shutil.which("npm")
    assert npm is not None
    return {
        "npm_config_registry": registry,
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_userconfig": str(tmp_path / "npmrc"),
        # No claude adapter on PATH: only npm, node and python.
        "PATH": f"{Path(npm).parent}:{Path(sys.executable).parent}:/usr/bin:/bin",
    }


@pytest.fixture
def refused(tmp_path: Path) -> Iterator[Bridge]:
    with refused_port() as port:  # every connection is refused
        bridge = start_bridge(tmp_path, "--log-level", "info", env=npm_env(tmp_path, f"http://127.0.0.1:{port}/"))
        yield bridge
        bridge.stop()


def test_create_with_an_unreachable_registry_answers_within_60s(refused: Bridge) -> None:
    client = refused.client(timeout=120)
    if next(a for a in client.get("/v1/agents").json()["agents"] if a["id"] == "claude")["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here (take it off PATH to run this test)")
    started = time.monotonic()
    response = client.post("/v1/sessions/unreachable", json={"agent": "claude"})
    elapsed = time.monotonic() - started
    assert elapsed < 60, elapsed
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["type"] == "urn:sandbox-agent:error:install_failed"
    stderr = body["details"]["stderr"]
    assert "ECONNREFUSED" in stderr
    first_lines = stderr.split("npm output:")[0]
    assert "    at " not in first_lines and "A complete log" not in first_lines  # the readable part
    log = refused.log()
    assert "installing claude: npm install @agentclientprotocol/claude-agent-acp" in log
    assert "npm (claude):" in log  # npm's progress, line by line
    bin_dir = refused.data_dir / "bin"
    assert not bin_dir.exists() or list(bin_dir.iterdir()) == []


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """Accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def install_in_background(bridge: Bridge) -> threading.Thread:
    """``POST /v1/agents/claude/install`` from a thread (it never ends by itself against the silent
    registry); the test is skipped where a claude adapter is on PATH (nothing would be installed)."""
    client = bridge.client(timeout=120)
    if next(a for a in client.get("/v1/agents").json()["agents"] if a["id"] == "claude")["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here (take it off PATH to run this test)")

    def install() -> None:
        try:
            httpx.post(bridge.url + "/v1/agents/claude/install", json={}, timeout=120)
        except httpx.HTTPError:
            pass  # the server went away: expected

    caller = threading.Thread(target=install, daemon=True)
    caller.start()
    return caller


def test_sigterm_during_an_install_exits_within_5s(tmp_path: Path, silent_registry: str) -> None:
    bridge = start_bridge(tmp_path, "--log-level", "info", env=npm_env(tmp_path, silent_registry))
    try:
        caller = install_in_background(bridge)
        bin_dir = bridge.data_dir / "bin"

        def staged() -> bool:
            return bin_dir.exists() and any(p.name.startswith(".claude.staging") for p in bin_dir.iterdir())

        assert wait_until(staged, 30, 0.05), bridge.log()
        staging = next(p for p in bin_dir.iterdir() if p.name.startswith(".claude.staging"))
        # npm is running (and waiting for the registry)
        assert wait_until(lambda: bool(_running(str(staging))), 30, 0.05), bridge.log()
        started = time.monotonic()
        bridge.proc.send_signal(signal.SIGTERM)
        bridge.proc.wait(30)
        elapsed = time.monotonic() - started
        assert elapsed < 5, (elapsed, bridge.log()[-2000:])
        assert not staging.exists()
        assert _running(str(staging)) == []  # npm's whole group is gone
        caller.join(10)
    finally:
        bridge.stop()


def _running(text: str) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, text)]


def _cmdline_has(proc_dir: Path, text: str) -> bool:
    try:
        return text in (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
