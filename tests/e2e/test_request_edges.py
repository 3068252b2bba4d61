"""Hostile request input: every answer is the legacy status with a ProblemDetails JSON body, never a
plain-text 500, and nothing a request carries reaches storage in a form it cannot keep."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.support import Bridge, create_session, events, send, until_type, wait_for_events


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert body["status"] == status and body["type"].startswith("urn:sandbox-agent:error:"), body
    return body  # type: ignore[no-any-return]


JSON = {"content-type": "application/json"}


def ensure_session(client: httpx.Client, session_id: str) -> str:
    response = client.post(f"/v1/sessions/{session_id}", json={"agent": "mock"})
    assert response.status_code in (200, 409), response.text
    return session_id


@pytest.mark.parametrize(
    "body",
    [
        b'{"message":"\\ud800x"}',
        b'{"message":"ok","attachments":[{"path":"a\\udc00"}]}',
        b'{"message":"x\\udbff"}',
        b'{"message":"ok","\\ud800":1}',
    ],
)
def test_lone_surrogate_in_message_is_400(bridge: Bridge, client: httpx.Client, body: bytes) -> None:
    sid = f"surrogate-msg-{uuid.uuid4().hex[:8]}"
    create_session(client, sid)
    body_ = problem(client.post(f"/v1/sessions/{sid}/messages", content=body, headers=JSON), 400)
    assert "surrogate" in body_["detail"]
    # Nothing was accepted, and the session still records what comes next.
    send(client, sid, "hello")
    wait_for_events(client, sid, until_type("turn.ended"), timeout=30)


def test_lone_surrogate_in_title_is_400(client: httpx.Client) -> None:
    body = b'{"agent":"mock","title":"\\udfff cut emoji"}'
    problem(client.post("/v1/sessions/surrogate-title", content=body, headers=JSON), 400)
    assert client.get("/v1/sessions").status_code == 200
    assert "surrogate-title" not in {s["sessionId"] for s in client.get("/v1/sessions").json()["sessions"]}


def test_surrogate_pair_is_accepted(client: httpx.Client) -> None:
    sid = "surrogate-pair"
    response = client.post(f"/v1/sessions/{sid}", content=b'{"agent":"mock","title":"\\ud83d\\ude00"}', headers=JSON)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("depth", [129, 5000, 100_000])
def test_deep_json_is_400(client: httpx.Client, depth: int) -> None:
    body = b"[" * depth + b"]" * depth
    detail = problem(client.post("/v1/sessions/deep", content=body, headers=JSON), 400)["detail"]
    assert "recursion limit exceeded" in detail


def test_json_at_depth_128_parses(client: httpx.Client) -> None:
    body = b'{"agent":"mock","mcp":' + b"[" * 127 + b"]" * 127 + b"}"
    # Valid JSON of the wrong shape: 422, not the depth error.
    problem(client.post("/v1/sessions/deep-ok", content=body, headers=JSON), 422)


@pytest.mark.parametrize("offset", ["²", "١٢", "1_0", " 1", "+1", "-1", "1.0"])
def test_non_ascii_digits_in_offset_are_400(client: httpx.Client, offset: str) -> None:
    ensure_session(client, "digits")
    problem(client.get("/v1/sessions/digits/events", params={"offset": offset}), 400)
    problem(client.get("/v1/sessions/digits/events", params={"limit": offset}), 400)


@pytest.mark.parametrize("value", [str(2**63), str(2**64 + 5), "9" * 50])
def test_huge_limit_and_offset_answer_whole_json(client: httpx.Client, value: str) -> None:
    if ensure_session(client, "huge-limit") and not events(client, "huge-limit", offset=1):
        send(client, "huge-limit", "hello")
    response = client.get("/v1/sessions/huge-limit/events", params={"limit": value})
    if response.status_code == 200:
        page = response.json()  # a whole body, parseable
        assert page["events"] and page["events"][0]["sequence"] == 1
    else:
        problem(response, 400)
    response = client.get("/v1/sessions/huge-limit/events", params={"offset": value})
    if int(value) < 2**64:
        assert response.status_code == 200, response.text
        assert response.json() == {"events": [], "hasMore": False}
    else:  # beyond u64, as legacy: "number too large to fit in target type"
        problem(response, 400)


@pytest.mark.parametrize("route", ["entries", "file", "stat"])
def test_nul_in_fs_path_is_problem_details(client: httpx.Client, route: str) -> None:
    response = client.get(f"/v1/fs/{route}", params={"path": "/tmp/a\x00b"})
    body = problem(response, response.status_code)
    assert response.status_code in (400, 502), body


def test_nul_in_fs_write_delete_mkdir_move(client: httpx.Client) -> None:
    for response in (
        client.put("/v1/fs/file", params={"path": "/tmp/a\x00b"}, content=b"x"),
        client.delete("/v1/fs/entry", params={"path": "/tmp/a\x00b"}),
        client.post("/v1/fs/mkdir", params={"path": "/tmp/a\x00b"}),
        client.post("/v1/fs/move", json={"from": "/tmp/a\x00b", "to": "/tmp/c"}),
        client.post(
            "/v1/fs/upload-batch",
            params={"path": "/tmp/a\x00b"},
            content=b"",
            headers={"content-type": "application/x-tar"},
        ),
    ):
        assert response.status_code in (400, 502), response.text
        problem(response, response.status_code)


def test_nul_in_attachment_path(client: httpx.Client) -> None:
    ensure_session(client, "nul-attach")
    response = client.post(
        "/v1/sessions/nul-attach/messages",
        json={"message": "look", "attachments": [{"path": "/tmp/a\x00b.png", "mime": "image/png"}]},
    )
    assert response.status_code in (204, 400), response.text
    if response.status_code == 400:
        problem(response, 400)
