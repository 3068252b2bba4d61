"""HEAD is answered on every GET route as the legacy server did: GET's status and headers, no body
(HEAD-based health checks see the server up), on a real uvicorn; a streaming GET (SSE) answers at
once; HEAD where no GET is allowed is GET's 405 or 404; auth applies as to GET."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT, Bridge, create_session, start_bridge

# A value for every required parameter of the GET operations of the contract.
VALUES = {"agent": "mock", "session_id": "head-s"}


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    tmp = tmp_path_factory.mktemp("head")
    (tmp / "f.txt").write_text("hello")
    server = start_bridge(tmp, token="secret")
    create_session(server.client(), "head-s")
    yield server
    server.stop()


def get_urls(tmp: Path) -> list[str]:
    document = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    urls = []
    for path, operations in document["paths"].items():
        if "get" not in operations:
            continue
        url = path.format(**VALUES)
        if url == "/v1/fs/entries":
            url += f"?path={tmp}"
        elif url.startswith("/v1/fs/"):
            url += f"?path={tmp / 'f.txt'}"
        urls.append(url)
    return urls


def test_head_answers_every_get_route_as_get_without_a_body(bridge: Bridge) -> None:
    client = bridge.client()
    urls = get_urls(bridge.data_dir.parent)
    assert "/v1/health" in urls and len(urls) == 10
    for url in urls:
        started = time.monotonic()
        head = client.head(url)
        assert time.monotonic() - started < 5, url  # the SSE stream too
        assert head.status_code == 200, (url, head.status_code)
        assert head.content == b""
        if not url.endswith("/sse"):
            get = client.get(url)
            assert get.status_code == 200
            assert head.headers.get("content-type") == get.headers.get("content-type"), url
            assert head.headers.get("content-length") == get.headers.get("content-length"), url
        else:
            assert head.headers["content-type"].startswith("text/event-stream")
    # The connection is still good for the next request after a HEAD of a stream.
    assert client.get("/v1/health").json() == {"status": "ok"}


def test_head_elsewhere_answers_as_get_would(bridge: Bridge) -> None:
    client = bridge.client()
    assert client.head("/v1/sessions/head-s/messages").status_code == 405  # POST only
    missing = client.head("/v1/nothing-here")
    assert (missing.status_code, missing.content) == (404, b"")
    assert bridge.client(token="wrong").head("/v1/sessions").status_code == 401
    assert bridge.client(token="wrong").head("/v1/health").status_code == 200  # public, as GET
