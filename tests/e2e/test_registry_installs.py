"""Installs from a hostile or careless ACP registry, on a real bridge with local registries (plain
http, and https with a certificate the bridge is told to trust): a checksum written ``sha256:<hex>``
is checked as that digest and a malformed one fails the install naming it; the link-chain archive
is refused with nothing written outside; plain-http catalogs and archives, and https ones that
redirect to plain http, are refused unless ``ACP_BRIDGE_REGISTRY_ALLOW_HTTP`` allows them; an agent
starts with the environment recorded at its install, a later catalog's only after a reinstall."""

from __future__ import annotations

import hashlib
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.agents.acp_catalog import platform_key
from tests.e2e.test_acp_registry import _tar
from tests.support import create_session, send, start_bridge, until_type, wait_for_events, wait_until
from tests.unit.test_acp_catalog import link_chain_archive

META = "sandbox-agent/acpRegistry"


class Registry:
    """What the local registry serves: the catalog's entries by id, files by path."""

    def __init__(self) -> None:
        self.url = ""
        self.agents: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.requests: list[str] = []

    def binary(self, agent_id: str, path: str, **target: Any) -> None:
        entry = {"archive": self.url + path, "cmd": "./run", **target}
        self.agents[agent_id] = {
            "id": agent_id,
            "name": agent_id,
            "version": "1.0.0",
            "distribution": {"binary": {platform_key(): entry}},
        }

    def handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry.requests.append(self.path)
                if self.path in registry.redirects:
                    self.send_response(302)
                    self.send_header("Location", registry.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/registry.json":
                    body: bytes | None = json.dumps(
                        {"version": "1.0.0", "agents": list(registry.agents.values())}
                    ).encode()
                else:
                    body = registry.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@contextmanager
def serve(registry: Registry, context: ssl.SSLContext | None = None) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), registry.handler())
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if context is not None else "http"
    registry.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    try:
        yield registry.url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def launcher(record: Path) -> bytes:
    """An agent program that writes down its ``PROBE_FROM`` and ``LD_PRELOAD``, then runs the mock."""
    return (
        f'#!/bin/sh\necho "$PROBE_FROM:${{LD_PRELOAD:-}}" >> {record}\nexec {sys.executable} -m app.agents.mock\n'
    ).encode()


def install(client: httpx.Client, agent_id: str, reinstall: bool = False) -> httpx.Response:
    return client.post(f"/v1/agents/{agent_id}/install", json={"reinstall": reinstall} if reinstall else {})


def turn(client: httpx.Client, session_id: str, agent: str) -> None:
    create_session(client, session_id, agent=agent)
    send(client, session_id, "Reply with exactly the single word OK.")
    wait_for_events(client, session_id, until_type("turn.ended"))
    assert client.post(f"/v1/sessions/{session_id}/terminate").status_code == 204


def stderr_of(response: httpx.Response) -> str:
    return str(response.json().get("details", {}).get("stderr", ""))


def test_checksums_links_and_the_environment_of_an_install(tmp_path: Path) -> None:
    registry = Registry()
    record = tmp_path / "started.txt"
    archive = _tar({"run": (launcher(record), 0o755)})
    digest = hashlib.sha256(archive).hexdigest()
    with serve(registry):
        registry.files["/probe.tar.gz"] = archive
        registry.files["/chain.tar.gz"] = link_chain_archive()
        registry.binary("prefixed", "/probe.tar.gz", sha256=f"sha256:{digest.upper()}", env={"PROBE_FROM": "v1"})
        registry.binary("short", "/probe.tar.gz", sha256=digest[:63])
        registry.binary("chain", "/chain.tar.gz")
        env = {"ACP_BRIDGE_ACP_REGISTRY_URL": registry.url + "/registry.json", "ACP_BRIDGE_REGISTRY_ALLOW_HTTP": "1"}
        server = start_bridge(tmp_path, env=env)
        try:
            client = server.client()
            assert wait_until(lambda: client.get("/v1/agents").json()["_meta"][META]["source"] != "snapshot", 10)
            assert install(client, "prefixed").status_code == 204  # `sha256:<HEX>` is that digest
            response = install(client, "short")
            assert response.status_code == 500 and "malformed sha256" in stderr_of(response), response.text
            assert digest[:63] in stderr_of(response)
            response = install(client, "chain")
            assert response.status_code == 500 and "outside the install folder" in stderr_of(response), response.text
            assert [p for p in tmp_path.rglob("escaped")] == []
            turn(client, "first", "prefixed")
        finally:
            server.stop()
        # A later catalog changes the agent's environment: the installed agent keeps its own.
        registry.binary(
            "prefixed", "/probe.tar.gz", sha256=digest, env={"PROBE_FROM": "v2", "LD_PRELOAD": "/nonexistent.so"}
        )
        server = start_bridge(tmp_path, env=env)
        try:
            client = server.client()
            assert wait_until(lambda: client.get("/v1/agents").json()["_meta"][META]["source"] != "snapshot", 10)
            turn(client, "second", "prefixed")
            assert record.read_text().splitlines() == ["v1:", "v1:"]
            assert install(client, "prefixed", reinstall=True).status_code == 204
            turn(client, "third", "prefixed")
            assert record.read_text().splitlines()[-1] == "v2:/nonexistent.so"
        finally:
            server.stop()


def test_plain_http_catalogs_archives_and_redirects_are_refused(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    plain, secure = Registry(), Registry()
    archive = _tar({"run": (launcher(tmp_path / "started.txt"), 0o755)})
    with serve(plain), serve(secure, context):
        plain.files["/probe.tar.gz"] = archive
        secure.files["/probe.tar.gz"] = archive
        secure.redirects["/moved.tar.gz"] = plain.url + "/probe.tar.gz"
        secure.redirects["/moved.json"] = plain.url + "/registry.json"
        secure.binary("secure", "/probe.tar.gz")
        secure.binary("moved", "/moved.tar.gz")
        secure.binary("plain", "/probe.tar.gz")
        secure.agents["plain"]["distribution"]["binary"][platform_key()]["archive"] = plain.url + "/probe.tar.gz"
        trust = {"SSL_CERT_FILE": str(cert)}

        # A plain-http catalog, and an https one that redirects to plain http: the snapshot stays.
        for url in (plain.url + "/registry.json", secure.url + "/moved.json"):
            folder = tmp_path / url.split(":")[0]
            folder.mkdir()
            server = start_bridge(folder, env={**trust, "ACP_BRIDGE_ACP_REGISTRY_URL": url})
            try:
                client = server.client()
                assert wait_until(lambda: "lastError" in client.get("/v1/agents").json()["_meta"][META], 10)  # noqa: B023
                meta = client.get("/v1/agents").json()["_meta"][META]
                assert meta["source"] == "snapshot" and "is not https" in meta["lastError"], meta
                assert "ACP_BRIDGE_REGISTRY_ALLOW_HTTP" in server.log()
            finally:
                server.stop()
        assert "/registry.json" not in plain.requests  # refused before anything was sent

        # An https catalog: its https archive installs; a plain-http one, or one redirected there, does not.
        (tmp_path / "secure").mkdir()
        env = {**trust, "ACP_BRIDGE_ACP_REGISTRY_URL": secure.url + "/registry.json"}
        server = start_bridge(tmp_path / "secure", env=env)
        try:
            client = server.client()
            assert wait_until(lambda: client.get("/v1/agents").json()["_meta"][META]["source"] != "snapshot", 10)
            assert install(client, "secure").status_code == 204
            for agent_id in ("moved", "plain"):
                response = install(client, agent_id)
                assert response.status_code == 500 and "is not https" in stderr_of(response), response.text
            assert "/probe.tar.gz" not in plain.requests
        finally:
            server.stop()
