"""Legacy HTTP behaviour: auth, CORS, errors (behavior §1, §2, §3), served in process (the app of
``create_app`` with its lifespan); the command line check starts a real server."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, create_session, in_process_bridge, start_bridge

TOKEN = "a" * 48
TOKEN_BODY = {
    "type": "urn:sandbox-agent:error:token_invalid",
    "title": "Token Invalid",
    "status": 401,
    "detail": "token invalid",
    "details": {"message": "missing or invalid token"},
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server with a token and explicit CORS settings; the client sends no token by itself."""
    with in_process_bridge(
        tmp_path_factory.mktemp("secured"),
        token=TOKEN,
        cors_allow_origin=["http://example.com"],
        cors_allow_method=["GET", "POST"],
        cors_allow_header=["Content-Type", "Authorization"],
    ) as client:
        client.headers.pop("Authorization", None)
        yield client


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with in_process_bridge(tmp_path_factory.mktemp("local")) as client:
        yield client


def test_health_is_public_and_agents_need_the_token(secured: httpx.Client) -> None:
    r = secured.get("/v1/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = secured.get("/v1/agents")
    assert r.status_code == 401 and r.json() == TOKEN_BODY
    assert r.headers["content-type"] == "application/json"
    assert "www-authenticate" not in r.headers
    r = secured.get("/v1/agents", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json() == TOKEN_BODY
    r = secured.get("/v1/agents", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    assert sorted(a["id"] for a in r.json()["agents"][:5]) == ["amp", "claude", "codex", "mock", "opencode"]


@pytest.mark.parametrize(
    "header",
    [
        f"Bearer {TOKEN}",
        f"bearer   {TOKEN}",
        f"Token {TOKEN}",
        "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode(),
        "Basic " + base64.b64encode(TOKEN.encode()).decode().rstrip("="),
        "Basic " + base64.urlsafe_b64encode(f":{TOKEN}".encode()).decode(),
    ],
)
def test_token_schemes(secured: httpx.Client, header: str) -> None:
    assert secured.get("/v1/sessions", headers={"Authorization": header}).status_code == 200


def test_the_first_of_two_authorization_headers_counts(secured: httpx.Client) -> None:
    good, bad = ("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer wrong")
    assert secured.get("/v1/sessions", headers=[good, bad]).status_code == 200
    assert secured.get("/v1/sessions", headers=[bad, good]).status_code == 401


def test_token_is_checked_on_every_v1_route(secured: httpx.Client) -> None:
    for method, path in [
        ("POST", "/v1/sessions/x"),
        ("GET", "/v1/sessions/x/events"),
        ("GET", "/v1/sessions/x/events/sse"),
        ("GET", "/v1/fs/entries"),
        ("GET", "/v1/agents/mock/modes"),
    ]:
        assert secured.request(method, path).status_code == 401


def test_cors_preflight_is_answered_before_auth(secured: httpx.Client) -> None:
    r = secured.options(
        "/v1/sessions",
        headers={"Origin": "http://example.com", "Access-Control-Request-Method": "POST"},
    )
    assert r.status_code == 200 and r.content == b""
    assert r.headers["access-control-allow-origin"] == "http://example.com"
    assert r.headers["access-control-allow-methods"] == "GET,POST"
    assert r.headers["access-control-allow-headers"] == "content-type,authorization"
    assert r.headers["vary"] == "origin, access-control-request-method, access-control-request-headers"
    # Every OPTIONS, even without a preflight header and on unknown paths.
    assert secured.options("/nowhere").status_code == 200
    r = secured.options("/v1/agents", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_cors_actual_request(secured: httpx.Client) -> None:
    r = secured.get("/v1/health", headers={"Origin": "http://example.com"})
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert r.headers["access-control-allow-origin"] == "http://example.com"
    assert r.headers["vary"] == "origin, access-control-request-method, access-control-request-headers"
    r = secured.get("/v1/agents", headers={"Origin": "http://example.com"})
    assert r.status_code == 401 and r.headers["access-control-allow-origin"] == "http://example.com"


def test_cors_wildcards_when_not_configured(client: httpx.Client) -> None:
    r = client.options("/v1/health", headers={"Origin": "http://example.com"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-methods"] == "*"
    assert r.headers["access-control-allow-headers"] == "*"
    assert "access-control-allow-origin" not in r.headers


def test_credentials_with_wildcards_refuse_to_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cors-allow-credentials"):
        start_bridge(tmp_path, "-C")


def test_agents_listing(client: httpx.Client) -> None:
    agents = client.get("/v1/agents").json()["agents"]
    # The legacy ids first; the ACP registry's agents follow (test_acp_registry.py).
    assert [a["id"] for a in agents[:5]] == ["claude", "codex", "opencode", "amp", "mock"]
    assert all("sandbox-agent/acpRegistry" in a["_meta"] for a in agents[5:])
    mock = agents[4]
    assert mock["installed"] is True and mock["credentialsAvailable"] is True and mock["version"] == "builtin"
    assert len(mock["capabilities"]) == 18
    assert all(v for k, v in mock["capabilities"].items() if k != "sharedProcess")
    assert mock["capabilities"]["sharedProcess"] is False
    codex = agents[1]
    assert codex["serverStatus"] == {"status": "stopped", "restartCount": 0}
    # behavior §9.2: codex has every capability but questions
    assert [k for k, v in codex["capabilities"].items() if not v] == ["questions"]
    assert "serverStatus" not in agents[0]


def test_mock_install_modes_and_models(client: httpx.Client) -> None:
    assert client.post("/v1/agents/mock/install", json={}).status_code == 204
    mock = next(a for a in client.get("/v1/agents").json()["agents"] if a["id"] == "mock")
    assert mock["path"].endswith("/mock")
    modes = client.get("/v1/agents/mock/modes").json()["modes"]
    assert [(m["id"], m["name"]) for m in modes] == [("build", "Build"), ("plan", "Plan")]
    assert all(m["description"] for m in modes)
    assert client.get("/v1/agents/mock/models").json() == {
        "models": [{"id": "mock", "name": "Mock"}],
        "defaultModel": "mock",
    }
    assert client.get("/v1/agents/amp/models").json()["defaultModel"] == "amp-default"


def problem(r: httpx.Response, status: int, error_type: str) -> dict:  # type: ignore[type-arg]
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["type"] == f"urn:sandbox-agent:error:{error_type}"
    assert body["status"] == status
    return body  # type: ignore[no-any-return]


def test_unknown_agent_is_400_everywhere(client: httpx.Client) -> None:
    body = problem(client.post("/v1/sessions/e1", json={"agent": "gpt"}), 400, "unsupported_agent")
    assert body == {
        "type": "urn:sandbox-agent:error:unsupported_agent",
        "title": "Unsupported Agent",
        "status": 400,
        "detail": "unsupported agent: gpt",
        "agent": "gpt",
    }
    problem(client.get("/v1/agents/gpt/modes"), 400, "unsupported_agent")
    problem(client.get("/v1/agents/gpt/models"), 400, "unsupported_agent")
    problem(client.post("/v1/agents/gpt/install", json={}), 400, "unsupported_agent")
    problem(client.post("/v1/sessions/e1", json={"agent": "Mock"}), 400, "unsupported_agent")


def test_duplicate_session_is_409_after_the_agent_check(client: httpx.Client) -> None:
    create_session(client, "dup")
    body = problem(client.post("/v1/sessions/dup", json={"agent": "mock"}), 409, "session_already_exists")
    assert body["detail"] == "session already exists: dup" and body["sessionId"] == "dup"
    problem(client.post("/v1/sessions/dup", json={"agent": "nope"}), 400, "unsupported_agent")


def test_unknown_session_is_404_everywhere(client: httpx.Client) -> None:
    expected = {
        "type": "urn:sandbox-agent:error:session_not_found",
        "title": "Session Not Found",
        "status": 404,
        "detail": "session not found: nope",
        "sessionId": "nope",
    }
    for method, path, body in [
        ("GET", "/v1/sessions/nope/events", None),
        ("GET", "/v1/sessions/nope/events/sse", None),
        ("POST", "/v1/sessions/nope/messages", {"message": "x"}),
        ("POST", "/v1/sessions/nope/messages/stream", {"message": "x"}),
        ("POST", "/v1/sessions/nope/terminate", None),
    ]:
        r = client.request(method, path, json=body)
        assert problem(r, 404, "session_not_found") == expected


def test_mode_errors(client: httpx.Client) -> None:
    body = problem(
        client.post("/v1/sessions/m1", json={"agent": "mock", "agentMode": "custom"}), 400, "mode_not_supported"
    )
    assert body["detail"] == "mode not supported: mock custom"
    assert body["agent"] == "mock" and body["details"] == {"mode": "custom"}
    body = problem(
        client.post("/v1/sessions/m2", json={"agent": "mock", "permissionMode": "yolo"}), 400, "invalid_request"
    )
    assert body["detail"] == "invalid request: invalid permission mode: yolo"
    assert "agent" not in body and "details" not in body


def test_agent_not_installed(client: httpx.Client) -> None:
    body = problem(client.post("/v1/sessions/ni", json={"agent": "amp"}), 404, "agent_not_installed")
    assert body["detail"] == "agent not installed: amp" and body["agent"] == "amp"


def test_body_and_query_errors_keep_legacy_statuses(client: httpx.Client) -> None:
    create_session(client, "fmt")
    url = "/v1/sessions/fmt/messages"
    assert client.post(url, content=b'{"message":"x"}').status_code == 415
    assert client.post(url, content=b"{", headers={"content-type": "application/json"}).status_code == 400
    assert client.post(url, content=b"", headers={"content-type": "application/json"}).status_code == 400
    assert client.post(url, json={"nope": 1}).status_code == 422
    assert client.post("/v1/sessions/fmt2", json={}).status_code == 422
    assert client.post(url, json={"message": "x", "extra": 1}).status_code == 204  # unknown fields ignored
    # JSON types are strict, as serde's were: no coercion of strings or numbers.
    assert client.post(url, json={"message": 5}).status_code == 422
    assert client.post("/v1/agents/mock/install", json={"reinstall": "yes"}).status_code == 422
    assert client.post("/v1/agents/mock/install", json={"reinstall": 1}).status_code == 422
    assert client.post("/v1/fs/move", json={"from": "a", "to": "b", "overwrite": "yes"}).status_code == 422
    assert (
        client.post(url, content=b'{"message":"x"}', headers={"content-type": "application/merge+json"}).status_code
        == 204
    )
    for query in [
        "offset=abc",
        "offset=-1",
        "offset=",
        "include_raw=1",
        "includeRaw=TRUE",
        "include_raw=true&includeRaw=true",
    ]:
        assert client.get(f"/v1/sessions/fmt/events?{query}").status_code == 400, query
    assert (
        client.post(url, content=b"x" * (2 * 1024 * 1024 + 1), headers={"content-type": "application/json"}).status_code
        == 413
    )


def test_framework_404_and_405(client: httpx.Client) -> None:
    assert client.get("/v1/nowhere").status_code == 404
    assert client.get("/v1/sessions/").status_code == 404
    r = client.get("/v1/sessions/x")
    assert r.status_code == 405 and "POST" in r.headers["allow"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_wildcard_origin_refuses_to_start(tmp_path: Path, how: str) -> None:
    args = ["-O", "*"] if how == "flag" else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if how == "env":
        env["ACP_BRIDGE_CORS_ALLOW_ORIGIN"] = '["*"]'
    done = subprocess.run(
        [sys.executable, "-m", "app", "server", "--data-dir", str(tmp_path), "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode != 0
    assert "--cors-allow-origin '*' is not supported" in done.stderr
