"""Installing a legacy agent's ACP adapter with npm, from a registry on 127.0.0.1.

The registry serves a package under the claude adapter's name whose program is the probe agent, so
the install is real npm work (packument, tarball, integrity, .bin link) and the installed program is
then started as the agent of a session.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from tests.support import (
    ROOT,
    Bridge,
    create_session,
    send,
    serving,
    start_bridge,
    until_type,
    wait_for_events,
)

pytestmark = pytest.mark.usefixtures("npm")


PACKAGE = "@agentclientprotocol/claude-agent-acp"
DEFAULT_VERSION = "0.101.0"  # the version the bridge installs when none is asked for
# The name the adapter had up to 0.23.1: older versions come from there.
OLD_PACKAGE = "@zed-industries/claude-agent-acp"
OLD_VERSION = "0.23.1"
# A version that needs a Node.js no system has.
FUTURE_VERSION = "99.0.0"
PROBE = ROOT / "tests" / "probes" / "probe_agent.py"
PROBE_RPC = PROBE.with_name("probe_rpc.py")  # the probe's JSON-RPC module, beside it in a package


def _manifest(package: str, version: str) -> dict[str, object]:
    manifest: dict[str, object] = {"name": package, "version": version, "bin": {"claude-agent-acp": "agent.py"}}
    if version == FUTURE_VERSION:
        manifest["engines"] = {"node": ">=999"}
    return manifest


def _tarball(package: str, version: str) -> bytes:
    manifest = _manifest(package, version)
    files = {
        "package/package.json": json.dumps(manifest).encode(),
        "package/agent.py": PROBE.read_bytes(),
        "package/probe_rpc.py": PROBE_RPC.read_bytes(),
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class Registry:
    url: str = ""
    # package -> version -> tarball
    tarballs: dict[str, dict[str, bytes]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    available: bool = True

    def packument(self, package: str) -> dict[str, object]:
        versions = {}
        for version, data in self.tarballs[package].items():
            versions[version] = {
                **_manifest(package, version),
                "dist": {
                    "tarball": f"{self.url}/tarballs/{package}/{version}.tgz",
                    "shasum": hashlib.sha1(data).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                },
            }
        latest = "9.9.9" if "9.9.9" in versions else max(versions)
        return {"name": package, "dist-tags": {"latest": latest}, "versions": versions}


@pytest.fixture
def registry() -> Iterator[Registry]:
    new = {v: _tarball(PACKAGE, v) for v in (DEFAULT_VERSION, "9.9.9", FUTURE_VERSION)}
    state = Registry(tarballs={PACKAGE: new, OLD_PACKAGE: {OLD_VERSION: _tarball(OLD_PACKAGE, OLD_VERSION)}})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = unquote(self.path)
            state.requests.append(path)
            body: bytes | None = None
            kind = "application/octet-stream"
            if state.available and path.lstrip("/") in state.tarballs:
                body, kind = json.dumps(state.packument(path.lstrip("/"))).encode(), "application/json"
            elif state.available and path.startswith("/tarballs/"):
                package, _, version = path.removeprefix("/tarballs/").removesuffix(".tgz").rpartition("/")
                body = state.tarballs.get(package, {}).get(version)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error":"not found"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as state.url:
        yield state


@pytest.fixture
def bridge(tmp_path: Path, registry: Registry) -> Iterator[Bridge]:
    # Only this registry, a fresh npm cache and no claude adapter on PATH.
    env = {
        "npm_config_registry": registry.url + "/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_userconfig": str(tmp_path / "npmrc"),
        "npm_config_fetch_retries": "0",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "ANTHROPIC_API_KEY": "sk-ant-test",  # claude sessions need credentials to start
        "ACP_BRIDGE_NODE_ON_DEMAND": "0",  # the system's Node.js only (test_node_on_demand.py brings one)
    }
    npm = shutil.which("npm")
    assert npm is not None
    # npm (and node beside it), and a python3 for the probe's `#!/usr/bin/env python3`.
    env["PATH"] = f"{Path(npm).parent}:{Path(sys.executable).parent}:{env['PATH']}"
    bridge = start_bridge(tmp_path, env=env)
    yield bridge
    bridge.stop()


def _claude(client: httpx.Client) -> dict[str, object]:
    agents = client.get("/v1/agents").json()["agents"]
    return next(a for a in agents if a["id"] == "claude")


def test_install_then_a_session_runs_the_installed_adapter(bridge: Bridge, registry: Registry) -> None:
    client = bridge.client(timeout=180)
    before = _claude(client)
    if before["installed"]:
        pytest.skip(f"a claude ACP adapter is on PATH here: {before.get('path')} (take it off PATH to run this test)")
    assert client.post("/v1/agents/claude/install", json={}).status_code == 204
    info = _claude(client)
    program = bridge.data_dir / "bin" / "claude" / "node_modules" / ".bin" / "claude-agent-acp"
    assert info["installed"] is True and info["version"] == DEFAULT_VERSION
    assert info["path"] == str(program) and info["source"] == "installed"
    assert not [p for p in (bridge.data_dir / "bin").iterdir() if p.name.startswith(".")]  # no staging left

    # Installed: a second install is a no-op that asks the registry for nothing.
    asked = len(registry.requests)
    assert client.post("/v1/agents/claude/install", json={}).status_code == 204
    assert len(registry.requests) == asked

    create_session(client, "installed", agent="claude")
    send(client, "installed", "hello")
    evs = wait_for_events(client, "installed", until_type("turn.ended"), timeout=30)
    deltas = [e["data"]["delta"] for e in evs if e["type"] == "item.delta" and e["source"] == "agent"]
    assert deltas == ["probe: hello"]
    client.post("/v1/sessions/installed/terminate")


def test_create_installs_a_missing_agent_at_the_asked_version(bridge: Bridge) -> None:
    client = bridge.client(timeout=180)
    if _claude(client)["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here (take it off PATH to run this test)")
    create_session(client, "auto", agent="claude", agentVersion="9.9.9")
    manifest = bridge.data_dir / "bin" / "claude" / "node_modules" / PACKAGE / "package.json"
    assert json.loads(manifest.read_text())["version"] == "9.9.9"
    client.post("/v1/sessions/auto/terminate")

    # reinstall replaces it with the default version, swapped in whole.
    assert client.post("/v1/agents/claude/install", json={"reinstall": True}).status_code == 204
    assert _claude(client)["version"] == DEFAULT_VERSION


def test_older_versions_come_from_the_old_name_and_reinstall_updates(bridge: Bridge) -> None:
    client = bridge.client(timeout=180)
    if _claude(client)["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here")
    answer = client.post("/v1/agents/claude/install", json={"agentVersion": OLD_VERSION})
    assert answer.status_code == 204, answer.text
    assert (bridge.data_dir / "bin" / "claude" / "node_modules" / OLD_PACKAGE / "package.json").is_file()
    assert _claude(client)["version"] == OLD_VERSION
    create_session(client, "old", agent="claude")
    client.post("/v1/sessions/old/terminate")
    # An update: today's name at the tested version; `latest` is the newest published.
    assert client.post("/v1/agents/claude/install", json={"reinstall": True}).status_code == 204
    assert _claude(client)["version"] == DEFAULT_VERSION
    assert not (bridge.data_dir / "bin" / "claude" / "node_modules" / OLD_PACKAGE).exists()
    answer = client.post("/v1/agents/claude/install", json={"reinstall": True, "agentVersion": "latest"})
    assert answer.status_code == 204 and _claude(client)["version"] == "9.9.9"


def test_an_adapter_needing_a_newer_node_is_refused_naming_the_requirement(bridge: Bridge) -> None:
    client = bridge.client(timeout=180)
    if _claude(client)["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here")
    response = client.post("/v1/agents/claude/install", json={"agentVersion": "9.9.9"})
    assert response.status_code == 204
    response = client.post("/v1/agents/claude/install", json={"agentVersion": FUTURE_VERSION, "reinstall": True})
    assert response.status_code == 500
    stderr = response.json()["details"]["stderr"]
    assert f"{PACKAGE}@{FUTURE_VERSION} needs Node.js >=999" in stderr
    assert "ACP_BRIDGE_NODE_ON_DEMAND on (it is off here)" in stderr
    assert _claude(client)["version"] == "9.9.9"  # the earlier install is left as it was


def test_a_failed_install_is_a_500_and_leaves_nothing(bridge: Bridge, registry: Registry) -> None:
    client = bridge.client(timeout=180)
    if _claude(client)["installed"]:
        pytest.skip("a claude ACP adapter is on PATH here (take it off PATH to run this test)")
    registry.available = False
    response = client.post("/v1/agents/claude/install", json={})
    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["type"].endswith("install_failed") and body["status"] == 500
    assert f"npm install {PACKAGE}@{DEFAULT_VERSION} failed" in body["details"]["stderr"]
    assert "404" in body["details"]["stderr"]
    assert _claude(client)["installed"] is False
    bin_dir = bridge.data_dir / "bin"
    assert not bin_dir.exists() or list(bin_dir.iterdir()) == []

    # A session create of the missing agent fails the same way, and the id stays free.
    failed = client.post("/v1/sessions/later", json={"agent": "claude"})
    assert failed.status_code == 500 and failed.json()["details"]["stderr"]
    registry.available = True
    create_session(client, "later", agent="claude")
    client.post("/v1/sessions/later/terminate")


def test_an_agent_without_an_installer_says_so(bridge: Bridge) -> None:
    client = bridge.client()
    response = client.post("/v1/agents/amp/install", json={"reinstall": True})
    assert response.status_code == 500
    assert "no installer for amp" in response.json()["details"]["stderr"]


def test_agents_say_which_copy_runs_and_which_it_hides(tmp_path: Path, registry: Registry) -> None:
    # A global npm install of the adapter on PATH: bin/claude-agent-acp -> lib/node_modules/<package>/agent.py.
    package = tmp_path / "global" / "lib" / "node_modules" / PACKAGE
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps(_manifest(PACKAGE, "9.9.9")))
    (package / "agent.py").write_bytes(PROBE.read_bytes())
    (package / "probe_rpc.py").write_bytes(PROBE_RPC.read_bytes())
    (package / "agent.py").chmod(0o755)
    bin_dir = tmp_path / "global" / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude-agent-acp").symlink_to(package / "agent.py")
    npm = shutil.which("npm")
    assert npm is not None
    env = {
        "npm_config_registry": registry.url + "/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_userconfig": str(tmp_path / "npmrc"),
        "PATH": f"{bin_dir}:{Path(npm).parent}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "ANTHROPIC_API_KEY": "sk-ant-test",
    }
    bridge = start_bridge(tmp_path, env=env)
    try:
        client = bridge.client(timeout=180)
        on_path = _claude(client)
        assert on_path["source"] == "path" and on_path["version"] == "9.9.9", on_path
        assert on_path["path"] == str(bin_dir / "claude-agent-acp") and "hiddenCopy" not in on_path
        assert client.post("/v1/agents/claude/install", json={"reinstall": True}).status_code == 204
        installed = _claude(client)
        assert installed["source"] == "installed" and installed["version"] == DEFAULT_VERSION, installed
        assert installed["hiddenCopy"] == {
            "source": "path",
            "path": str(bin_dir / "claude-agent-acp"),
            "version": "9.9.9",
        }
    finally:
        bridge.stop()
