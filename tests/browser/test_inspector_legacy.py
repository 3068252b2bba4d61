"""What legacy inspector users had, in the inspector page: MCP servers and skill sources at create,
the stream-mode switch (SSE, polling, turn stream) and pause, copy and clear of the events, and a
connect screen while the token is missing or wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Page
from tests.browser.test_inspector import TOKEN, assert_no_console_errors, event_rows, event_sequences, expect
from tests.browser.test_inspector import open_inspector as open_page
from tests.support import Bridge, create_session, send, start_bridge, until_type, wait_for_events


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-legacy-work")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> Iterator[Bridge]:
    tmp = tmp_path_factory.mktemp("ui-legacy-bridge")
    bridge = start_bridge(tmp, token=TOKEN, cwd=workdir)
    yield bridge
    bridge.stop()


def open_inspector(ui: Page, server: Bridge, **options: Any) -> Any:
    options.setdefault("token", TOKEN)
    return open_page(ui, server.url, **options)


def session_info(server: Bridge, sid: str) -> dict[str, Any]:
    sessions = server.client().get("/v1/sessions").json()["sessions"]
    return next(s for s in sessions if s["sessionId"] == sid)


def test_mcp_servers_and_skill_sources_at_create(ui: Page, server: Bridge, workdir: Path, tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "my-test-skill"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: my-test-skill\n---\nA test skill.\n")
    page = open_inspector(ui, server)
    page.locator("#create-form details.more > summary").click()

    # A config that is not JSON is refused in the page, nothing is created.
    page.get_by_role("button", name="Add MCP server").click()
    server_row = page.get_by_test_id("mcp-server")
    server_row.get_by_label("Config (JSON object)").fill("{not json")
    page.get_by_test_id("session-id-input").fill("ui-extras")
    page.get_by_test_id("new-session").click()
    expect(page.get_by_test_id("error-banner")).to_contain_text("MCP server everything: the config is not JSON")
    assert all(s["sessionId"] != "ui-extras" for s in server.client().get("/v1/sessions").json()["sessions"])

    server_row.get_by_label("Name").fill("files")
    server_row.get_by_label("Config (JSON object)").fill('{"type": "local", "command": ["mcp-files", "--ro"]}')
    page.get_by_role("button", name="Add MCP server").click()
    second = page.get_by_test_id("mcp-server").nth(1)
    second.get_by_label("Name").fill("remote")
    second.get_by_label("Config (JSON object)").fill('{"type": "remote", "url": "http://127.0.0.1:9/mcp"}')
    page.get_by_role("button", name="Add skill source").click()
    source = page.get_by_test_id("skill-source")
    source.get_by_label("Type").select_option("local")
    source.get_by_label("Source", exact=True).fill(str(skill.parent))
    source.get_by_label("Skills (comma-separated, optional)").fill("my-test-skill")
    page.get_by_test_id("new-session").click()
    expect(page.locator('[data-testid=session-item][data-session-id="ui-extras"]')).to_be_visible()
    expect(page.get_by_test_id("mcp-server")).to_have_count(0)  # the form starts empty again

    info = session_info(server, "ui-extras")
    assert info["mcp"]["files"] == {"type": "local", "command": ["mcp-files", "--ro"], "args": []}
    assert info["mcp"]["remote"]["url"] == "http://127.0.0.1:9/mcp"
    assert info["skills"] == {"sources": [{"type": "local", "source": str(skill.parent), "skills": ["my-test-skill"]}]}
    assert (workdir / ".agents" / "skills" / "my-test-skill" / "SKILL.md").is_file()
    assert_no_console_errors(ui)


def test_stream_modes_and_pause(ui: Page, server: Bridge) -> None:
    api = server.client()
    create_session(api, "ui-modes")
    page = open_inspector(ui, server, fragment="#session=ui-modes")
    state = page.locator("#stream-state")
    expect(state).to_have_attribute("data-state", "live")
    chat = page.get_by_test_id("chat")
    assistant = chat.locator("[data-role=assistant]")

    # Polling: GET .../events after the last sequence.
    page.get_by_test_id("stream-mode").select_option("poll")
    expect(state).to_have_attribute("data-state", "polling")
    send(api, "ui-modes", "echo by polling")
    expect(assistant.last).to_contain_text("by polling")

    # Paused: nothing is followed; resumed, what came meanwhile arrives once, in order.
    page.get_by_test_id("stream-pause").click()
    expect(state).to_have_attribute("data-state", "paused")
    expect(page.get_by_test_id("stream-pause")).to_have_attribute("aria-pressed", "true")
    shown = event_sequences(page)
    send(api, "ui-modes", "echo while paused")
    meanwhile = wait_for_events(api, "ui-modes", until_type("turn.ended", 2))
    assert event_sequences(page) == shown
    page.get_by_test_id("stream-pause").click()
    expect(event_rows(page)).to_have_count(len(meanwhile))
    assert event_sequences(page) == [e["sequence"] for e in meanwhile]
    expect(assistant.last).to_contain_text("while paused")

    # The turn stream: a message sent from the page brings the events of its turn.
    page.get_by_test_id("stream-mode").select_option("turn")
    expect(state).to_have_attribute("data-state", "turn stream")
    page.get_by_test_id("message-input").fill("echo by turn stream")
    page.get_by_test_id("send").click()
    expect(assistant.last).to_contain_text("by turn stream")
    logged = page.locator("#request-log .path").all_inner_texts()
    assert any(path.startswith("/v1/sessions/ui-modes/messages/stream") for path in logged), logged
    third = wait_for_events(api, "ui-modes", until_type("turn.ended", 3))
    expect(event_rows(page)).to_have_count(len(third))

    # Back to SSE: from the newest event shown, nothing twice.
    page.get_by_test_id("stream-mode").select_option("sse")
    expect(state).to_have_attribute("data-state", "live")
    send(api, "ui-modes", "echo back on sse")
    expect(assistant.last).to_contain_text("back on sse")
    everything = [e["sequence"] for e in wait_for_events(api, "ui-modes", until_type("turn.ended", 4))]
    expect(event_rows(page)).to_have_count(len(everything))
    assert event_sequences(page) == everything
    assert_no_console_errors(ui)


def test_copy_and_clear_events(ui: Page, server: Bridge) -> None:
    api = server.client()
    create_session(api, "ui-copy")
    send(api, "ui-copy", "echo copy me")
    recorded = wait_for_events(api, "ui-copy", until_type("turn.ended"))
    ui.page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = open_inspector(ui, server, fragment="#session=ui-copy")
    expect(event_rows(page)).to_have_count(len(recorded))

    page.get_by_test_id("events-copy").click()
    expect(page.get_by_test_id("events-copy")).to_have_text(f"Copied {len(recorded)}")
    copied = json.loads(page.evaluate("() => navigator.clipboard.readText()"))
    assert copied == recorded

    page.get_by_test_id("events-clear").click()
    expect(event_rows(page)).to_have_count(0)
    expect(page.locator("#event-count")).to_have_text(f"{len(recorded)} events, 0 shown")
    # The conversation stays; what comes next is listed, and is all that is copied.
    expect(page.get_by_test_id("chat").locator("[data-role=assistant]").last).to_contain_text("copy me")
    send(api, "ui-copy", "echo after the clear")
    later = wait_for_events(api, "ui-copy", until_type("turn.ended"), offset=recorded[-1]["sequence"])
    expect(event_rows(page)).to_have_count(len(later))
    assert event_sequences(page) == [e["sequence"] for e in later]
    page.get_by_test_id("events-copy").click()
    expect(page.get_by_test_id("events-copy")).to_have_text(f"Copied {len(later)}")
    assert [e["sequence"] for e in json.loads(page.evaluate("() => navigator.clipboard.readText()"))] == [
        e["sequence"] for e in later
    ]
    assert_no_console_errors(ui)


@pytest.mark.parametrize("token", [None, "wrong"], ids=["missing", "wrong"])
def test_connect_screen_until_the_token_is_right(ui: Page, server: Bridge, token: str | None) -> None:
    page = open_inspector(ui, server, token=token)
    screen = page.get_by_test_id("connect-screen")
    expect(screen).to_be_visible()
    expect(screen).to_contain_text("The server refused this token" if token else "The server needs a token")
    expect(screen).to_contain_text("Token Invalid")
    badge = page.locator("#server-status")
    expect(badge).to_have_attribute("data-connected", "false")
    expect(badge).to_contain_text("not connected")
    expect(badge).to_have_class("pill danger")
    expect(page.locator("#app-main")).to_be_hidden()
    ui.shot(f"connect-{token or 'missing'}")

    page.get_by_test_id("connect-token").fill(TOKEN)
    page.get_by_test_id("connect").click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(badge).to_have_attribute("data-connected", "true")
    expect(screen).to_be_hidden()
    expect(page.locator("#app-main")).to_be_visible()
    expect(page.get_by_test_id("agent-select").locator("option[value=mock]")).to_have_count(1)
    assert_no_console_errors(ui, "status of 401")
