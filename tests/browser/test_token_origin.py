"""The inspector's token belongs to the server it was given for: however the tab is navigated
(``/ui/?url=<other server>``, the connection form), another server never receives it. A stand-in
server on 127.0.0.1 records the headers of every request it gets; Chromium runs the page."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.browser.conftest import Page
from tests.browser.test_inspector import EXTRA_HEADERS, TOKEN, expect, open_inspector
from tests.support import Bridge, start_bridge, wait_until

ALLOWED_HEADERS = "authorization, content-type, accept, last-event-id, x-inspector-test"


class StandIn:
    """A server that answers what the page asks first (health, agents, sessions) and allows any
    origin and the Authorization header, so a page that sent a token would have it recorded."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
                self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_one(self) -> None:
                recorded.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                path = self.path.split("?", 1)[0]
                if self.command == "OPTIONS":
                    self.answer(204)
                elif path == "/v1/health":
                    self.answer(200, {"status": "ok"})
                elif path == "/v1/agents":
                    self.answer(200, {"agents": []})
                elif path == "/v1/sessions":
                    self.answer(200, {"sessions": []})
                else:
                    self.answer(404, {"title": "Not Found", "detail": path})

            do_GET = do_POST = do_OPTIONS = do_PUT = do_DELETE = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def gets(self) -> list[dict[str, str]]:
        return [headers for method, _, headers in list(self.requests) if method == "GET"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("ui-token-origin"), token=TOKEN)
    yield server
    server.stop()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    server = StandIn()
    yield server
    server.close()


def wait_for_gets(stand_in: StandIn, count: int) -> list[dict[str, str]]:
    assert wait_until(lambda: len(stand_in.gets()) >= count, 20), stand_in.requests
    return stand_in.gets()


def apply_connection(page: Any, url: str) -> None:
    """The connection form's URL set to ``url`` (nothing else touched) and applied: the page reloads."""
    if not page.locator("#connection").evaluate("d => d.open"):
        page.locator("#connection > summary").click()
    page.locator("#conn-url").fill(url)
    with page.expect_navigation():
        page.locator("#connection-form button[type=submit]").click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def assert_nothing_of_ours(requests: list[dict[str, str]]) -> None:
    for headers in requests:
        assert "authorization" not in headers, headers
        assert "x-inspector-test" not in headers, headers
        assert TOKEN not in json.dumps(headers)


def test_the_token_is_never_sent_to_another_server(ui: Page, secured: Bridge, stand_in: StandIn) -> None:
    page = open_inspector(ui, secured.url, token=TOKEN, headers=EXTRA_HEADERS)
    expect(page.locator("#server-status")).to_contain_text("connected")
    expect(page.locator("#server-status")).to_contain_text("token")

    # The same tab pointed at another server, as a link could: it gets no token.
    page.goto(f"{secured.url}/ui/?url={stand_in.url}")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#server-status")).to_contain_text(stand_in.url)
    assert_nothing_of_ours(wait_for_gets(stand_in, 3))
    assert page.locator("#conn-token").input_value() == ""

    # Back to the bridge with the connection form: its token is still its own.
    apply_connection(page, secured.url)
    expect(page.locator("#server-status")).to_contain_text("connected")
    expect(page.locator("#server-status")).to_contain_text("token")
    assert page.locator("#conn-token").input_value() == TOKEN

    # The form's URL changed to the other server, its token field left as it was: not carried over.
    seen = len(stand_in.gets())
    apply_connection(page, stand_in.url)
    assert_nothing_of_ours(wait_for_gets(stand_in, seen + 3))

    # A reload of the page's own server with ?token= (no url=) is for the page's own server.
    page.goto(f"{secured.url}/ui/?token={TOKEN}")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#server-status")).to_contain_text(secured.url)
    expect(page.locator("#server-status")).to_contain_text("token")
    assert_nothing_of_ours(stand_in.gets())

    # A token given for the other server goes to it (what the stand-in records is what a page sends).
    page.goto(f"{secured.url}/ui/?url={stand_in.url}&token=stand-in-t0ken")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert wait_until(lambda: any(h.get("authorization") == "Bearer stand-in-t0ken" for h in stand_in.gets()), 20), (
        stand_in.requests
    )
    assert all(h.get("authorization") in (None, "Bearer stand-in-t0ken") for h in stand_in.gets())
