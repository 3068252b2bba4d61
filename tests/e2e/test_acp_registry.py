"""Agents of the ACP registry's catalog: listed beside the legacy ids (from the shipped snapshot, or
refreshed from ``ACP_BRIDGE_ACP_REGISTRY_URL``), installed through ``POST /v1/agents/{id}/install``
(a ``binary`` archive checked against its sha256, an ``npx`` package with real npm) and run as
sessions, without an agents file. A server on 127.0.0.1 plays the registry, the download host and
the npm registry; the agents it serves start the built-in mock agent."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from app.agents.acp_catalog import platform_key
from tests.support import (
    ROOT,
    Bridge,
    create_session,
    refused_port,
    send,
    serving,
    start_bridge,
    until_type,
    wait_for_events,
    wait_until,
)

META = "sandbox-agent/acpRegistry"
SNAPSHOT = ROOT / "app" / "agents" / "data" / "acp_registry.json"
NPM_PACKAGE = "@acp-test/probe-agent"
LAUNCHER = f"#!/bin/sh\nexec {sys.executable} -m app.agents.mock\n".encode()


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return buffer.getvalue()


WHEEL = "probe_uvx_agent-1.2.3-py3-none-any.whl"


def _wheel() -> bytes:
    """A wheel whose program starts the mock agent with this interpreter (which has the bridge)."""
    python = repr(sys.executable)
    module = f"import os\n\ndef main():\n    os.execv({python}, [{python}, '-m', 'app.agents.mock'])\n"
    info = "probe_uvx_agent-1.2.3.dist-info"
    files = {
        "probe_uvx_agent/__init__.py": module.encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: probe-uvx-agent\nVersion: 1.2.3\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[console_scripts]\nprobe-uvx-agent = probe_uvx_agent:main\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


@dataclass
class Served:
    url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def catalog(self) -> dict[str, Any]:
        tarball, archive_zip = self.files["/archives/probe.tar.gz"], self.files["/archives/probe.zip"]

        def binary(path: str, digest: str | None, cmd: str = "./probe/run") -> dict[str, Any]:
            target: dict[str, Any] = {"archive": self.url + path, "cmd": cmd, "env": {"PROBE_FROM": "registry"}}
            if digest is not None:
                target["sha256"] = digest
            return {"binary": {platform_key(): target}}

        def agent(agent_id: str, distribution: dict[str, Any]) -> dict[str, Any]:
            return {"id": agent_id, "name": agent_id.title(), "version": "1.2.3", "distribution": distribution}

        return {
            "version": "1.0.0",
            "agents": [
                agent("probe-bin", binary("/archives/probe.tar.gz", hashlib.sha256(tarball).hexdigest())),
                agent("probe-badsum", binary("/archives/probe.tar.gz", "0" * 64)),
                agent("probe-zip", binary("/archives/probe.zip", hashlib.sha256(archive_zip).hexdigest())),
                agent("probe-npx", {"npx": {"package": f"{NPM_PACKAGE}@1.0.0"}}),
                agent("probe-uvx", {"uvx": {"package": "probe-uvx-agent@1.2.3"}}),
                agent("opencode", {"npx": {"package": "not-the-legacy-opencode@1.0.0"}}),
                {"id": "broken", "version": "1"},  # no distribution: skipped
            ],
            "extensions": [],
        }

    def packument(self) -> dict[str, Any]:
        data = self.files["/tarballs/probe-agent-1.0.0.tgz"]
        return {
            "name": NPM_PACKAGE,
            "dist-tags": {"latest": "1.0.0"},
            "versions": {
                "1.0.0": {
                    "name": NPM_PACKAGE,
                    "version": "1.0.0",
                    "bin": {"probe-agent": "run.sh"},
                    "dist": {
                        "tarball": f"{self.url}/tarballs/probe-agent-1.0.0.tgz",
                        "shasum": hashlib.sha1(data).hexdigest(),
                        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                    },
                }
            },
        }


@pytest.fixture
def served() -> Iterator[Served]:
    state = Served()
    program = {"probe/run": (LAUNCHER, 0o755), "probe/README": (b"probe\n", 0o644)}
    state.files["/archives/probe.tar.gz"] = _tar(program)
    state.files["/archives/probe.zip"] = _zip(program)
    wheel = state.files[f"/files/{WHEEL}"] = _wheel()
    link = f"{{url}}/files/{WHEEL}#sha256={hashlib.sha256(wheel).hexdigest()}"
    state.files["/simple/probe-uvx-agent/"] = f'<html><body><a href="{link}">{WHEEL}</a></body></html>'.encode()
    manifest = {"name": NPM_PACKAGE, "version": "1.0.0", "bin": {"probe-agent": "run.sh"}}
    state.files["/tarballs/probe-agent-1.0.0.tgz"] = _tar(
        {"package/package.json": (json.dumps(manifest).encode(), 0o644), "package/run.sh": (LAUNCHER, 0o755)}
    )

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.do_GET(head=True)

        def do_GET(self, head: bool = False) -> None:
            path = unquote(self.path)
            state.requests.append(path)
            body = state.files.get(path)
            if body is not None and path.startswith("/simple/"):
                body = body.replace(b"{url}", state.url.encode())
            if path == "/registry.json":
                body = json.dumps(state.catalog()).encode()
            elif path.lstrip("/") == NPM_PACKAGE:
                body = json.dumps(state.packument()).encode()
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            if path.startswith("/simple/"):
                self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as state.url:
        yield state


def _agents(client: httpx.Client) -> tuple[dict[str, dict[str, Any]], list[str], dict[str, Any]]:
    body = client.get("/v1/agents").json()
    return {a["id"]: a for a in body["agents"]}, [a["id"] for a in body["agents"]], body["_meta"][META]


@pytest.fixture
def bridge(tmp_path: Path, served: Served) -> Iterator[Bridge]:
    env = {
        "ACP_BRIDGE_ACP_REGISTRY_URL": served.url + "/registry.json",
        "ACP_BRIDGE_REGISTRY_ALLOW_HTTP": "1",  # the local registry is plain http
        "npm_config_registry": served.url + "/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_userconfig": str(tmp_path / "npmrc"),
        "npm_config_fetch_retries": "0",
        "UV_INDEX_URL": served.url + "/simple/",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
        # No uv on PATH: the bridge installs it.
        "PATH": ":".join(
            str(p) for p in {Path(shutil.which("npm") or "/usr/bin/npm").parent, Path(sys.executable).parent}
        )
        + ":/usr/bin:/bin",
    }
    server = start_bridge(tmp_path, env=env)
    client = server.client()
    assert wait_until(lambda: _agents(client)[2]["source"] != "snapshot", 10), _agents(client)[2]
    yield server
    server.stop()


def _turn(client: httpx.Client, session_id: str, agent: str) -> str:
    create_session(client, session_id, agent=agent)
    send(client, session_id, "Reply with exactly the single word OK.")
    evs = wait_for_events(client, session_id, until_type("turn.ended"))
    texts = [
        "".join(p.get("text", "") for p in e["data"]["item"]["content"])
        for e in evs
        if e["type"] == "item.completed" and e["data"]["item"]["role"] == "assistant"
    ]
    assert client.post(f"/v1/sessions/{session_id}/terminate").status_code == 204
    return texts[-1]


def test_the_snapshot_is_listed_after_the_legacy_ids_with_its_date(tmp_path: Path) -> None:
    snapshot = json.loads(SNAPSHOT.read_text())
    server = start_bridge(tmp_path)  # the tests' URL is empty: only the snapshot
    try:
        agents, ids, meta = _agents(server.client())
        assert meta["source"] == "snapshot" and meta["date"] == meta["snapshotDate"] == snapshot["date"]
        assert meta["url"] is None
        assert ids[:5] == ["claude", "codex", "opencode", "amp", "mock"]
        listed = [a["id"] for a in snapshot["agents"] if a["id"] not in ids[:5]]
        assert ids[5:] == listed and meta["agents"] == len(snapshot["agents"])
        assert ids.count("opencode") == 1 and "_meta" not in agents["opencode"]  # the legacy one
        claude_code = agents["claude-code-acp"]
        assert claude_code["_meta"][META]["distribution"] == "npx"
        assert claude_code["installed"] is False
    finally:
        server.stop()


def test_a_registry_out_of_reach_leaves_the_snapshot(tmp_path: Path) -> None:
    with refused_port() as port:
        registry_out_of_reach(tmp_path, f"http://127.0.0.1:{port}/registry.json")


def registry_out_of_reach(tmp_path: Path, url: str) -> None:
    server = start_bridge(
        tmp_path,
        "--log-level",
        "info",
        env={"ACP_BRIDGE_ACP_REGISTRY_URL": url, "ACP_BRIDGE_REGISTRY_ALLOW_HTTP": "1"},
    )
    try:
        client = server.client()
        assert wait_until(lambda: "lastError" in _agents(client)[2], 10)
        _, ids, meta = _agents(client)
        assert meta["source"] == "snapshot" and meta["url"] == url and "ConnectError" in meta["lastError"]
        assert "claude-code-acp" in ids
        assert client.get("/v1/health").json() == {"status": "ok"}
        # Offline is normal: said once, at info, naming what is listed instead.
        said = [line for line in server.log().splitlines() if "the ACP registry is out of reach" in line]
        assert len(said) == 1 and "WARNING" not in said[0] and "listed from the snapshot of" in said[0], said
    finally:
        server.stop()


def test_the_catalog_is_refreshed_from_the_url(bridge: Bridge, served: Served) -> None:
    agents, ids, meta = _agents(bridge.client())
    assert meta["source"] == served.url + "/registry.json" and meta["date"] and meta["snapshotDate"]
    assert ids[5:] == ["probe-bin", "probe-badsum", "probe-zip", "probe-npx", "probe-uvx"]  # no opencode, no broken
    assert agents["probe-bin"]["_meta"][META] == {"name": "Probe-Bin", "version": "1.2.3", "distribution": "binary"}
    assert agents["probe-bin"]["installed"] is False


def test_a_binary_agent_is_downloaded_checked_and_run(bridge: Bridge, served: Served) -> None:
    client = bridge.client()
    assert client.post("/v1/agents/probe-bin/install", json={}).status_code == 204
    agents, _, _ = _agents(client)
    info = agents["probe-bin"]
    assert info["installed"] is True and info["version"] == "1.2.3"
    assert info["path"].endswith("/acp-registry/probe-bin/files/probe/run")
    assert _turn(client, "bin", "probe-bin") == "OK"
    # Installed once; reinstall downloads again.
    downloads = served.requests.count("/archives/probe.tar.gz")
    assert client.post("/v1/agents/probe-bin/install", json={}).status_code == 204
    assert served.requests.count("/archives/probe.tar.gz") == downloads
    assert client.post("/v1/agents/probe-bin/install", json={"reinstall": True}).status_code == 204
    assert served.requests.count("/archives/probe.tar.gz") == downloads + 1


def test_a_zip_archive_keeps_the_program_executable(bridge: Bridge) -> None:
    client = bridge.client()
    assert client.post("/v1/agents/probe-zip/install", json={}).status_code == 204
    assert _turn(client, "zip", "probe-zip") == "OK"


def test_a_checksum_mismatch_fails_the_install(bridge: Bridge) -> None:
    client = bridge.client()
    response = client.post("/v1/agents/probe-badsum/install", json={})
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["type"] == "urn:sandbox-agent:error:install_failed"
    assert "checksum mismatch" in json.dumps(body) and "0" * 64 in json.dumps(body)
    assert _agents(client)[0]["probe-badsum"]["installed"] is False
    # A create installs a missing agent, and fails the same way.
    response = client.post("/v1/sessions/bad", json={"agent": "probe-badsum"})
    assert response.status_code == 500 and "checksum mismatch" in response.text
    leftovers = list((bridge.data_dir / "bin" / "acp-registry").iterdir())
    assert [p.name for p in leftovers if "badsum" in p.name] == []


@pytest.mark.usefixtures("npm")
def test_an_npx_agent_is_installed_with_npm_and_run(bridge: Bridge) -> None:
    client = bridge.client()
    # A create installs a missing agent, in the version it asks for (npm's error when there is none).
    response = client.post("/v1/sessions/npx-old", json={"agent": "probe-npx", "agentVersion": "9.9.9"})
    assert response.status_code == 500 and "@acp-test/probe-agent@9.9.9" in response.text, response.text
    assert _agents(client)[0]["probe-npx"]["installed"] is False
    response = client.post("/v1/agents/probe-npx/install", json={})
    assert response.status_code == 204, response.text
    info = _agents(client)[0]["probe-npx"]
    assert info["installed"] is True and info["version"] == "1.0.0"
    assert info["path"].endswith("/acp-registry/probe-npx/node_modules/.bin/probe-agent")
    assert _turn(client, "npx", "probe-npx") == "OK"


@pytest.mark.usefixtures("pypi")  # set up before the bridge, which inherits it
def test_a_uvx_agent_is_installed_with_uv_and_run(bridge: Bridge, served: Served) -> None:
    """No uv on PATH: the bridge installs uv from PyPI with pip (a real part: PyPI must be reachable),
    then `uv tool install`s the agent's package from the local index."""
    client = bridge.client()
    response = client.post("/v1/agents/probe-uvx/install", json={})
    assert response.status_code == 204, response.text
    info = _agents(client)[0]["probe-uvx"]
    assert info["installed"] is True and info["version"] == "1.2.3"
    assert info["path"].endswith("/bin/probe-uvx-agent") and "/acp-registry/.probe-uvx.uv-" in info["path"]
    # Else the bridge uses the uv on its PATH (which has this Python's bin directory), as it should.
    if shutil.which("uv") is None and not (Path(sys.executable).parent / "uv").exists():
        assert (bridge.data_dir / "bin" / "acp-registry" / ".uv" / "bin" / "uv").is_file()
    assert any(path.startswith("/simple/probe-uvx-agent") for path in served.requests)
    assert _turn(client, "uvx", "probe-uvx") == "OK"
    # A reinstall replaces the tool environment and removes the old one.
    old = Path(info["path"]).parents[1]
    assert client.post("/v1/agents/probe-uvx/install", json={"reinstall": True}).status_code == 204
    assert not old.exists() and Path(_agents(client)[0]["probe-uvx"]["path"]).is_file()
