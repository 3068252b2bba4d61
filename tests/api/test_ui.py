"""The inspector page's route: public static files at /ui/, /v1 still behind the token."""

from __future__ import annotations

import socket
import tomllib
from collections.abc import Iterator

import httpx
import pytest

from app.ui import STATIC_DIR
from tests.support import ROOT, Bridge, start_bridge


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("ui-route"), "-O", "http://page.example", token="s3cret")
    yield server
    server.stop()


def test_page_is_public_and_the_api_is_not(secured: Bridge) -> None:
    page = httpx.get(secured.url + "/ui/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'data-testid="error-banner"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    for name, kind in [("main.js", "text/javascript"), ("inspector.css", "text/css")]:
        asset = httpx.get(f"{secured.url}/ui/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert httpx.get(secured.url + "/v1/agents").status_code == 401
    assert httpx.get(secured.url + "/ui/../v1/agents").status_code in (401, 404)
    assert httpx.get(secured.url + "/ui/missing.js").status_code == 404


def test_ui_without_slash_redirects_keeping_the_query(secured: Bridge) -> None:
    response = httpx.get(secured.url + "/ui?token=s3cret&headers=%7B%7D")
    assert response.status_code == 308
    assert response.headers["location"] == "/ui/?token=s3cret&headers=%7B%7D"
    assert httpx.get(secured.url + "/ui").headers["location"] == "/ui/"


def raw_get(bridge: Bridge, target: str, host: str) -> tuple[str, dict[str, str]]:
    """A GET of ``target`` exactly as written (httpx would remove its dot segments)."""
    with socket.create_connection(("127.0.0.1", bridge.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head[1:])}
    return head[0], headers


@pytest.mark.parametrize("target", ["/ui/.", "/ui/.?url=http://other.example", "/ui/./.", "/ui"])
def test_ui_redirects_are_relative_and_never_echo_the_host(secured: Bridge, target: str) -> None:
    status, headers = raw_get(secured, target, "attacker.example")
    assert status.split()[1] in ("307", "308"), status
    location = headers["location"]
    assert location.startswith("/ui") and not location.startswith("//") and "attacker" not in location, location
    if "?" in target:
        assert location.endswith("?url=http://other.example")


def test_page_is_not_in_the_legacy_openapi_document(secured: Bridge) -> None:
    paths = httpx.get(secured.url + "/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


def test_cors_with_origins_names_authorization_by_default(secured: Bridge) -> None:
    response = httpx.options(
        secured.url + "/v1/sessions",
        headers={"Origin": "http://page.example", "Access-Control-Request-Method": "GET"},
    )
    assert response.headers["access-control-allow-origin"] == "http://page.example"
    assert response.headers["access-control-allow-headers"].split(",") == ["*", "authorization"]


def test_static_files_are_package_data() -> None:
    """An installed wheel carries every file of the page."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["app.ui"]
    files = [p for p in STATIC_DIR.rglob("*") if p.is_file()]
    assert {"index.html", "main.js", "inspector.css"} <= {p.name for p in files}
    for path in files:
        relative = path.relative_to(STATIC_DIR.parent)
        assert any(relative.match(pattern) for pattern in patterns), relative


HTML_SINKS = (
    "innerHTML",
    "outerHTML =",
    "insertAdjacentHTML",
    "DOMParser",
    "document.write",
    "createContextualFragment",
    "srcdoc",
    "parseHTMLUnsafe",
    "setHTMLUnsafe",
)


def test_the_page_never_parses_html(secured: Bridge) -> None:
    """Text is set as text: no HTML sink in the page's code, and the browser is told to refuse them."""
    for path in STATIC_DIR.glob("*.js"):
        source = path.read_text()
        assert not [sink for sink in HTML_SINKS if sink in source], path.name
    csp = httpx.get(secured.url + "/ui/").headers["content-security-policy"]
    assert "require-trusted-types-for 'script'" in csp and "trusted-types 'none'" in csp
