"""A server without a token serves loopback names, its bound address and the allowed hosts only, and
takes state-changing requests only from its own origin, CORS origins and non-browser clients; with a
token everything is as legacy. A real server on 127.0.0.1 (and its front before the application is
built)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_front import serve
from tests.support import Bridge, start_bridge

CORS_ORIGIN = "http://localhost:5173"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    bridge = start_bridge(
        tmp_path_factory.mktemp("open"), "-O", CORS_ORIGIN, env={"ACP_BRIDGE_ALLOWED_HOSTS": "devbox.lan"}
    )
    yield bridge
    bridge.stop()


def refused(response: httpx.Response, words: str) -> None:
    assert response.status_code == 403, response.text
    assert response.headers["content-type"] == "application/json"
    problem = response.json()
    assert problem["type"] == "urn:sandbox-agent:error:permission_denied"
    assert problem["status"] == 403
    assert words in problem["detail"], problem
    assert "token" in problem["details"]["message"]


def test_a_foreign_host_is_refused_everywhere(open_server: Bridge) -> None:
    with open_server.client() as client:
        for path in ("/v1/health", "/v1/sessions", "/ui/", "/openapi.json"):
            refused(client.get(path, headers={"Host": "evil.example"}), "Host 'evil.example'")
        refused(client.post("/v1/sessions/x", json={"agent": "mock"}, headers={"Host": "rebind.example:80"}), "Host")
        port = open_server.port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "devbox.lan", f"DevBox.lan:{port}"):
            assert client.get("/v1/health", headers={"Host": host}).status_code == 200, host


def test_curl_from_loopback_works_and_a_cross_site_post_does_not(open_server: Bridge, tmp_path: Path) -> None:
    with open_server.client() as client:
        # As curl and the SDKs: no Origin, no Sec-Fetch-Site.
        assert client.post("/v1/sessions/plain", json={"agent": "mock"}).status_code == 200
        target = tmp_path / "made-by-a-page"
        for headers in (
            {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"},
        ):
            # What a page's no-cors POSTs did: end a session, make a directory.
            refused(client.post("/v1/sessions/plain/terminate", headers=headers), "cross-site request refused")
            refused(client.post("/v1/fs/mkdir", params={"path": str(target)}, headers=headers), "cross-site")
        assert not target.exists()
        assert client.get("/v1/sessions/plain/events", headers={"Origin": "http://evil.example"}).status_code == 200
        # A page of the server itself, and an origin CORS allows, may.
        own = open_server.url
        assert client.post("/v1/fs/mkdir", params={"path": str(target)}, headers={"Origin": own}).status_code == 200
        response = client.post("/v1/sessions/plain/terminate", headers={"Origin": CORS_ORIGIN})
        assert response.status_code == 204
        assert response.headers["access-control-allow-origin"] == CORS_ORIGIN


def test_with_a_token_hosts_and_origins_are_as_legacy(tmp_path: Path) -> None:
    bridge = start_bridge(tmp_path, token="secret")
    try:
        with bridge.client() as client:
            headers = {"Host": "evil.example", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
            assert client.post("/v1/sessions/s", json={"agent": "mock"}, headers=headers).status_code == 200
            assert client.get("/v1/health", headers=headers).status_code == 200
            anonymous = httpx.post(bridge.url + "/v1/sessions/s/terminate", headers=headers)
            assert anonymous.status_code == 401
    finally:
        bridge.stop()


def test_the_front_applies_the_same_rule_before_the_application_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    with serve(tmp_path, gate, monkeypatch) as (url, front, _, _):
        refused(httpx.get(url + "/v1/health", headers={"Host": "evil.example"}), "Host 'evil.example'")
        assert httpx.get(url + "/v1/health").status_code == 200
        assert front.app is None
