"""The inspector page in headless Chromium against a real bridge and the mock agent."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import ARTIFACTS, Page, build_inspector_url
from tests.browser.proxy import DroppingProxy
from tests.support import Bridge, create_session, events, send, start_bridge, until_type, wait_for_events

TOKEN = "ui-t0ken"
EXTRA_HEADERS = {"X-Inspector-Test": "yes"}


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ui-work")
    (root / "hello.txt").write_text("hello from the bridge\n")
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_text("inner\n")
    return root


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> Iterator[Bridge]:
    """A bridge with a token whose sessions and /v1/fs are confined to ``workdir``."""
    tmp = tmp_path_factory.mktemp("ui-bridge")
    server = start_bridge(tmp, "--fs-root", str(workdir), token=TOKEN, cwd=workdir)
    yield server
    server.stop()


def open_inspector(ui: Page, base_url: str, *, fragment: str = "", **url_options: Any) -> Any:
    page = ui.page
    page.goto(build_inspector_url(base_url, **url_options) + fragment)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    return page


def chat_items(page: Any) -> list[list[str]]:
    """[role, kind, item id, text] of every conversation entry, in page order."""
    items: list[list[str]] = page.eval_on_selector_all(
        "[data-testid=chat] [data-testid=chat-item]",
        "nodes => nodes.map(n => [n.dataset.role, n.dataset.kind, n.dataset.itemId || '', n.innerText])",
    )
    return items


def event_rows(page: Any) -> Any:
    return page.locator("[data-testid=event-list] [data-testid=event]")


def event_sequences(page: Any) -> list[int]:
    sequences: list[int] = page.eval_on_selector_all(
        "[data-testid=event-list] [data-testid=event]", "nodes => nodes.map(n => Number(n.dataset.sequence))"
    )
    return sequences


def assert_no_console_errors(ui: Page, *allowed: str) -> None:
    unexpected = ui.console.unexpected(*allowed)
    assert not unexpected, f"console errors: {unexpected}"


def test_full_mock_session_from_build_inspector_url(ui: Page, secured: Bridge) -> None:
    page = open_inspector(ui, secured.url, token=TOKEN, headers=EXTRA_HEADERS)
    # The token is kept in the tab, not in the address bar.
    assert "token=" not in page.url and "headers=" not in page.url
    expect(page.locator("#server-status")).to_contain_text("connected")

    page.get_by_test_id("agent-select").select_option("mock")
    page.get_by_test_id("session-id-input").fill("ui-demo")
    page.get_by_test_id("new-session").click()
    item = page.locator('[data-testid=session-item][data-session-id="ui-demo"]')
    expect(item).to_be_visible()
    expect(item).to_have_attribute("aria-current", "true")
    chat = page.get_by_test_id("chat")
    expect(chat.locator("[data-kind='session.started']")).to_have_count(1)

    # A message and the assistant's reply.
    page.get_by_test_id("message-input").fill("echo Hello from the browser")
    page.get_by_test_id("send").click()
    expect(chat.locator("[data-role=user][data-kind=message]").last).to_contain_text("echo Hello from the browser")
    assistant = chat.locator("[data-role=assistant][data-kind=message]")
    expect(assistant.last).to_contain_text("Hello from the browser")
    expect(page.get_by_test_id("message-input")).to_have_value("")

    # Tool calls with their results and diffs.
    page.get_by_test_id("message-input").fill("tool")
    page.get_by_test_id("message-input").press("Enter")
    expect(chat.locator("[data-kind=tool_call]")).to_have_count(1)
    result = chat.locator("[data-kind=tool_result]")
    expect(result).to_contain_text("mock search results")
    expect(result.locator(".diff .add")).to_contain_text(["+mock output", "+new"])
    expect(result.locator(".diff .del")).to_contain_text(["-old"])

    # Permission prompts answered from the page reach the agent.
    page.get_by_test_id("message-input").fill("permission")
    page.get_by_test_id("send").click()
    prompts = page.get_by_test_id("permission-prompt")
    expect(prompts).to_have_count(2)
    expect(page.locator("#session-state")).to_have_text("waiting for you")
    ui.shot("permission")
    allow = page.locator("[data-testid=permission-prompt][data-permission-id$='_permission']")
    deny = page.locator("[data-testid=permission-prompt][data-permission-id$='_permission_denied']")
    allow.get_by_test_id("permission-once").click()
    deny.get_by_test_id("permission-reject").click()
    expect(prompts).to_have_count(0)
    # As legacy: the replies are recorded as resolutions, the mock says nothing more.
    expect(chat.locator("[data-kind='permission.resolved']")).to_have_count(2)
    expect(chat.locator("[data-kind='permission.resolved']").first).to_contain_text("command_execution: accept")

    # Questions: one answered, one rejected.
    page.get_by_test_id("message-input").fill("question")
    page.get_by_test_id("send").click()
    questions = page.get_by_test_id("question-prompt")
    expect(questions).to_have_count(2)
    color = page.locator("[data-testid=question-prompt][data-question-id$='_question']")
    color.get_by_label("Blue").check()
    expect(color.locator("[data-testid=question-answer][value=Blue]")).to_be_checked()
    color.get_by_test_id("question-submit").click()
    page.locator("[data-testid=question-prompt][data-question-id$='_question_reject']").get_by_test_id(
        "question-reject"
    ).click()
    expect(questions).to_have_count(0)
    expect(chat.locator("[data-kind='question.resolved']")).to_have_count(2)
    expect(chat.locator("[data-kind='question.resolved']").first).to_contain_text("answered: Blue")

    # What the agent was told, as the API records it.
    with httpx.Client(base_url=secured.url, headers={"Authorization": f"Bearer {TOKEN}"}) as api:
        recorded = events(api, "ui-demo")
    resolved = {e["data"]["permission_id"]: e["data"]["status"] for e in recorded if e["type"] == "permission.resolved"}
    assert sorted(resolved.values()) == ["accept", "reject"]
    answered = [e["data"] for e in recorded if e["type"] == "question.resolved"]
    assert [(q["status"], q["response"]) for q in answered] == [("answered", "Blue"), ("rejected", None)]
    ui.shot("conversation")

    # The raw events, filtered, with their JSON.
    expect(page.locator("[data-testid=event-list] [data-testid=event]")).to_have_count(len(recorded))
    page.locator("#event-filter").select_option("question.resolved")
    visible = page.locator("[data-testid=event-list] [data-testid=event]:visible")
    expect(visible).to_have_count(2)
    visible.first.locator("summary").click()
    expect(visible.first.locator("pre")).to_contain_text('"status": "answered"')
    ui.shot("events")
    page.locator("#event-filter").select_option("")

    # Terminate.
    page.get_by_test_id("terminate").click()
    expect(chat.locator("[data-kind='session.ended']")).to_have_count(1)
    expect(item).to_have_attribute("data-status", "ended")
    expect(page.get_by_test_id("message-input")).to_be_disabled()
    expect(page.get_by_test_id("terminate")).to_be_disabled()

    # Reload: the session is rebuilt from the log, with the token the tab kept.
    before = chat_items(page)
    sequences = event_sequences(page)
    assert sequences == list(range(1, len(sequences) + 1))
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("[data-testid=event-list] [data-testid=event]")).to_have_count(len(sequences))
    expect(chat.locator("[data-kind='session.ended']")).to_have_count(1)
    assert event_sequences(page) == sequences
    assert chat_items(page) == before
    expect(page.get_by_test_id("message-input")).to_be_disabled()

    # The request log shows the calls, with the token kept out of the copyable command.
    page.locator("#tab-requests").click()
    expect(page.locator("#request-log li").first).to_be_visible()
    assert TOKEN not in page.locator("#request-log").inner_text()
    assert_no_console_errors(ui)


def test_sse_dropped_and_resumed_without_duplicates_or_gaps(ui: Page, secured: Bridge) -> None:
    proxy = DroppingProxy(secured.port)
    api = secured.client()
    try:
        create_session(api, "ui-drop")
        send(api, "ui-drop", "echo before the drop")
        wait_for_events(api, "ui-drop", until_type("turn.ended"))
        page = open_inspector(ui, proxy.url, token=TOKEN, headers=EXTRA_HEADERS, fragment="#session=ui-drop")
        chat = page.get_by_test_id("chat")
        expect(chat.locator("[data-role=assistant]").last).to_contain_text("before the drop")
        expect(page.locator("#stream-state")).to_have_attribute("data-state", "live")
        seen_before = len(events(api, "ui-drop"))
        expect(event_rows(page)).to_have_count(seen_before)
        # The token and the extra headers of the URL travel with the stream's request.
        first = proxy.sse_requests[0].lower()
        assert f"authorization: bearer {TOKEN}" in first and "x-inspector-test: yes" in first

        # The connection drops and cannot come back for a while; the agent goes on meanwhile.
        proxy.refuse_sse = True
        assert proxy.drop_sse() == 1
        expect(page.locator("#stream-state")).to_have_attribute("data-state", re.compile("reconnecting"))
        for message in ("tool", "status", "plan", "echo during the drop"):
            send(api, "ui-drop", message)
        wait_for_events(api, "ui-drop", until_type("turn.ended", 5))
        proxy.refuse_sse = False

        # Back: the page resumes after the last event it had.
        recorded = events(api, "ui-drop")
        expect(event_rows(page)).to_have_count(len(recorded), timeout=30_000)
        resumed = [head for head in proxy.sse_requests[1:] if f"last-event-id: {seen_before}" in head.lower()]
        assert resumed, proxy.sse_requests
        expect(chat.locator("[data-role=assistant]").last).to_contain_text("during the drop")

        # A drop in the middle of a turn, resumed at once.
        send(api, "ui-drop", "demo")
        assert proxy.drop_sse() <= 1
        wait_for_events(api, "ui-drop", until_type("turn.ended", 6))
        recorded = events(api, "ui-drop")
        expect(event_rows(page)).to_have_count(len(recorded), timeout=30_000)

        assert event_sequences(page) == [e["sequence"] for e in recorded]
        items = [i for i in chat_items(page) if i[2]]
        item_ids = [i[2] for i in items]
        assert len(item_ids) == len(set(item_ids)), item_ids
        expected_ids = []
        for event in recorded:
            item_id = event["data"].get("item", {}).get("item_id") if event["type"].startswith("item.") else None
            if item_id and item_id not in expected_ids:
                expected_ids.append(item_id)
        assert sorted(item_ids) == sorted(expected_ids)
        ui.shot("resumed")
    finally:
        proxy.close()
    # Refused connections are the browser's own network errors, not the page's.
    assert_no_console_errors(ui, "/events/sse")


def test_agents_files_and_problem_details(ui: Page, secured: Bridge, workdir: Path) -> None:
    api = secured.client()
    create_session(api, "ui-files")
    page = open_inspector(ui, secured.url, token=TOKEN, fragment="#session=ui-files")

    page.locator("#tab-agents").click()
    mock = page.locator("[data-agent-id=mock]")
    expect(mock).to_contain_text("installed")
    expect(mock.locator(".cap.on", has_text="permissions")).to_have_count(1)
    ui.shot("agents")

    page.locator("#tab-files").click()
    browser_pane = page.get_by_test_id("fs-browser")
    entries = browser_pane.get_by_test_id("fs-entry")
    expect(entries).to_have_count(2)
    expect(page.locator("#fs-where")).to_have_text(str(workdir))
    with page.expect_download() as download_info:
        browser_pane.get_by_role("button", name="Download hello.txt").click()
    download = download_info.value
    assert download.suggested_filename == "hello.txt"
    assert Path(download.path()).read_text() == "hello from the bridge\n"

    browser_pane.get_by_role("button", name="Open directory sub").click()
    expect(entries).to_have_count(1)
    expect(entries.first).to_have_attribute("data-path", str(workdir / "sub" / "inner.txt"))
    upload = ARTIFACTS.parent / "upload-me.txt"
    upload.parent.mkdir(parents=True, exist_ok=True)
    upload.write_text("uploaded from the page\n")
    page.locator("#fs-upload").set_input_files(str(upload))
    browser_pane.get_by_role("button", name="Upload", exact=True).click()
    expect(entries).to_have_count(2)
    assert (workdir / "sub" / "upload-me.txt").read_text() == "uploaded from the page\n"
    ui.shot("files")

    # An API error shows its ProblemDetails: outside --fs-root.
    page.locator("#fs-path").fill("/")
    browser_pane.get_by_role("button", name="List", exact=True).click()
    banner = page.get_by_test_id("error-banner")
    expect(banner).to_be_visible()
    problem = api.get("/v1/fs/entries", params={"path": "/"}).json()
    expect(banner).to_contain_text(problem["title"])
    expect(banner).to_contain_text(problem["detail"])

    # And a second session with a taken id: 409 from the create form.
    page.get_by_test_id("session-id-input").fill("ui-files")
    page.get_by_test_id("new-session").click()
    conflict = api.post("/v1/sessions/ui-files", json={"agent": "mock"}).json()
    expect(banner).to_contain_text(conflict["title"])
    expect(banner).to_contain_text(conflict["detail"])
    ui.shot("error")
    assert_no_console_errors(ui, "status of 403", "status of 409")


def test_a_wrong_token_is_shown_not_swallowed(ui: Page, secured: Bridge) -> None:
    page = open_inspector(ui, secured.url, token="wrong")
    screen = page.get_by_test_id("connect-screen")
    expect(screen).to_be_visible()
    expect(screen).to_contain_text("Token Invalid")
    assert_no_console_errors(ui, "status of 401")


def test_keyboard_labels_and_narrow_window(ui: Page, secured: Bridge) -> None:
    api = secured.client()
    create_session(api, "ui-narrow")
    send(api, "ui-narrow", "echo narrow window")
    page = open_inspector(ui, secured.url, token=TOKEN, fragment="#session=ui-narrow")
    expect(page.get_by_test_id("chat").locator("[data-role=assistant]").last).to_contain_text("narrow window")

    # Every control has an accessible name.
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button')]
            .filter(el => !el.closest('[hidden]'))
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                          && !el.textContent.trim())
            .map(el => el.outerHTML)"""
    )
    assert unnamed == []

    # Tab goes through the page in reading order: create form, sessions, conversation, details.
    order = []
    page.locator("body").focus()
    for _ in range(40):
        page.keyboard.press("Tab")
        testid = page.evaluate("() => document.activeElement && document.activeElement.dataset.testid")
        if testid and testid not in order:
            order.append(testid)
    wanted = ["agent-select", "session-id-input", "new-session", "session-item", "terminate", "message-input", "send"]
    assert [t for t in order if t in wanted] == wanted

    # The message box sends with Enter from the keyboard alone.
    page.get_by_test_id("message-input").focus()
    page.keyboard.type("echo typed")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("chat").locator("[data-role=assistant]").last).to_contain_text("typed")

    ui.shot("wide")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.get_by_test_id("message-input")).to_be_visible()
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    page.get_by_test_id("message-input").scroll_into_view_if_needed()
    expect(page.get_by_test_id("send")).to_be_in_viewport()
    ui.shot("narrow", full_page=True)
    assert_no_console_errors(ui)


def test_page_on_another_origin_sends_the_token_through_cors(
    ui: Page, secured: Bridge, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The page from one server, the API of another one that allows its origin (-O)."""
    page_origin = secured.url
    tmp = tmp_path_factory.mktemp("ui-cors")
    other = start_bridge(tmp, "-O", page_origin, token="other-t0ken")
    try:
        preflight = httpx.options(
            other.url + "/v1/sessions/x",
            headers={
                "Origin": page_origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert "authorization" in preflight.headers["access-control-allow-headers"].split(",")
        page = ui.page
        page.goto(f"{page_origin}/ui/?url={other.url}&token=other-t0ken")
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.locator("#server-status")).to_contain_text(other.url)
        page.get_by_test_id("session-id-input").fill("ui-cors")
        page.get_by_test_id("new-session").click()
        page.get_by_test_id("message-input").fill("echo across origins")
        page.get_by_test_id("send").click()
        expect(page.get_by_test_id("chat").locator("[data-role=assistant]").last).to_contain_text("across origins")
        assert other.client().get("/v1/sessions").json()["sessions"][0]["sessionId"] == "ui-cors"
        assert_no_console_errors(ui)
    finally:
        other.stop()


def test_create_form_options_and_raw_events(ui: Page, secured: Bridge) -> None:
    page = open_inspector(ui, secured.url, token=TOKEN)
    page.get_by_test_id("agent-select").select_option("mock")
    page.locator("#create-form details.more > summary").click()
    # Modes and models come from the agent.
    expect(page.locator("#agent-mode option[value=plan]")).to_have_count(1)
    expect(page.locator("#model option[value=mock]")).to_have_count(1)
    page.get_by_label("Agent mode").select_option("plan")
    page.get_by_label("Permission mode").select_option("bypass")
    page.get_by_label("Model").select_option("mock")
    page.get_by_label("Title").fill("Options from the page")
    page.get_by_test_id("session-id-input").fill("ui-options")
    page.get_by_test_id("new-session").click()
    item = page.locator('[data-testid=session-item][data-session-id="ui-options"]')
    expect(item).to_contain_text("Options from the page")
    info = next(s for s in secured.client().get("/v1/sessions").json()["sessions"] if s["sessionId"] == "ui-options")
    assert (info["agentMode"], info["permissionMode"], info["model"], info["title"]) == (
        "plan",
        "bypass",
        "mock",
        "Options from the page",
    )

    page.get_by_test_id("message-input").fill("echo raw please")
    page.get_by_test_id("send").click()
    expect(page.get_by_test_id("chat").locator("[data-role=assistant]").last).to_contain_text("raw please")
    count = len(events(secured.client(), "ui-options"))
    expect(event_rows(page)).to_have_count(count)
    page.locator("#include-raw").check()
    expect(event_rows(page)).to_have_count(count)
    row = page.locator("[data-testid=event][data-type='item.completed']").last
    row.locator("summary").click()
    expect(row.locator("pre")).to_contain_text('"jsonrpc": "2.0"')
    assert event_sequences(page) == list(range(1, count + 1))
    assert_no_console_errors(ui)


def test_agent_install_shows_progress_and_npm_errors(ui: Page, tmp_path_factory: pytest.TempPathFactory) -> None:
    """An install that cannot reach its registry: the card shows it running, then npm's error."""
    tmp = tmp_path_factory.mktemp("ui-install")
    offline = {"npm_config_registry": "http://127.0.0.1:9/", "npm_config_fetch_retries": "0"}
    server = start_bridge(tmp, env=offline)
    try:
        page = open_inspector(ui, server.url)
        page.locator("#tab-agents").click()
        card = page.locator("[data-agent-id=opencode]")
        expect(card).to_contain_text("not installed")
        card.get_by_role("button", name="Install").click()
        if shutil.which("npm"):
            expect(card.get_by_role("button", name=re.compile("Installing"))).to_be_disabled()
        expect(card.locator(".install-error")).to_contain_text("install failed: opencode", timeout=60_000)
        expect(card.get_by_role("button", name="Install")).to_be_enabled()
        expect(page.get_by_test_id("error-banner")).to_contain_text("Install opencode: Install Failed")
        ui.shot("install-error")
    finally:
        server.stop()
    assert_no_console_errors(ui, "status of 500")


def test_session_rebuilt_from_the_log_after_a_server_restart(
    ui: Page, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("ui-restart")
    first = start_bridge(tmp, data_dir=tmp / "data")
    port = first.port
    try:
        api = first.client()
        create_session(api, "ui-restart", title="Before the restart")
        send(api, "ui-restart", "echo kept in the log")
        send(api, "ui-restart", "tool")
        wait_for_events(api, "ui-restart", until_type("turn.ended", 2))
        # Ended before the stop (one still open would come back open, to be continued).
        assert api.post("/v1/sessions/ui-restart/terminate").status_code == 204
        recorded = events(api, "ui-restart")
    finally:
        first.stop()
    second = start_bridge(tmp, data_dir=tmp / "data", port=port)
    try:
        page = open_inspector(ui, second.url, fragment="#session=ui-restart")
        chat = page.get_by_test_id("chat")
        expect(event_rows(page)).to_have_count(len(recorded))
        expect(chat.locator("[data-role=assistant][data-kind=message]").first).to_contain_text("kept in the log")
        expect(chat.locator("[data-kind=tool_result]")).to_contain_text("mock search results")
        item = page.locator('[data-testid=session-item][data-session-id="ui-restart"]')
        expect(item).to_contain_text("Before the restart")
        expect(item).to_have_attribute("data-status", "ended")
        expect(page.get_by_test_id("message-input")).to_be_disabled()
        assert event_sequences(page) == [e["sequence"] for e in recorded]
    finally:
        second.stop()
    assert_no_console_errors(ui)
