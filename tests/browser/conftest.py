"""Browser tests: Debian's Chromium, headless, driven by Playwright (no browser download).

Where Chromium is missing and the suite runs as root with apt-get, it installs Debian's `chromium`
package first. They fail, with the reason, when no browser can be started; ACP_BRIDGE_TEST_BROWSER=0
opts out (a skip that says so). ACP_BRIDGE_TEST_CHROMIUM names another Chromium binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support import ROOT
from tests.tiers import real_part, tier_fixture

# Headless and quiet: no sandbox (CI runs as root), and nothing reaching out to the network by itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(os.environ.get("ACP_BRIDGE_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "inspector"


def _opted_out() -> bool:
    return os.environ.get("ACP_BRIDGE_TEST_BROWSER", "").strip().lower() in ("0", "false", "no", "off")


def _chromium() -> str | None:
    named = os.environ.get("ACP_BRIDGE_TEST_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@real_part("browser")
def install_chromium() -> str | None:
    """Debian's chromium, installed with apt-get (as root); why it could not be, else None."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "it can be installed only as root with apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    print("installing Debian's chromium for the browser tests (apt-get)", file=sys.stderr, flush=True)
    for argv in (["apt-get", "update", "-qq", *lock], ["apt-get", "install", "-y", "-qq", *lock, "chromium"]):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            return f"{' '.join(argv[:2])} did not finish in 900 s"
        if done.returncode != 0:
            return f"{' '.join(argv[:2])} failed: {(done.stdout + done.stderr).strip()[-1000:]}"
    return None


# Package scope: Playwright's sync API keeps an event loop running in this thread while it is
# started, which the asyncio tests of other packages cannot share; it stops after the last test here.
@tier_fixture("browser", scope="package")
def browser() -> Iterator[Any]:
    if _opted_out():
        pytest.skip("browser tests opted out with ACP_BRIDGE_TEST_BROWSER=0 (unset it to run them)")
    hint = "install Debian's chromium (apt-get install chromium) or set ACP_BRIDGE_TEST_BROWSER=0"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"playwright is not installed ({exc}): pip install -e '.[test]', or set ACP_BRIDGE_TEST_BROWSER=0")
    executable = _chromium()
    if executable is None:
        failure = install_chromium()
        executable = _chromium()
        if executable is None:
            pytest.fail(f"no Chromium found and none could be installed ({failure}): {hint}")
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
    except Exception as exc:
        playwright.stop()
        pytest.fail(f"Chromium ({executable}) could not be started: {exc}\n{hint}")
    yield chromium
    chromium.close()
    playwright.stop()


@dataclass
class ConsoleLog:
    """What the page said on its console, and the uncaught errors it threw."""

    errors: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def unexpected(self, *allowed: str) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in allowed)]


@dataclass
class Page:
    page: Any
    console: ConsoleLog
    name: str

    def shot(self, label: str, **options: Any) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{label}.png"
        self.page.screenshot(path=str(path), **options)
        return path


@pytest.fixture
def ui(browser: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(20_000)
    page = context.new_page()
    console = ConsoleLog()

    def on_console(message: Any) -> None:
        text = f"{message.type}: {message.text}"
        console.messages.append(text)
        if message.type == "error":
            location = message.location or {}
            console.errors.append(f"{message.text} ({location.get('url', '')})")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console.errors.append(f"uncaught: {error}"))
    yield Page(page, console, request.node.name.removeprefix("test_"))
    context.close()


def build_inspector_url(base_url: str, token: str | None = None, headers: dict[str, str] | None = None) -> str:
    """The legacy SDK's buildInspectorUrl({baseUrl, token, headers}), as it builds it."""
    params = {}
    if token:
        params["token"] = token
    if headers:
        params["headers"] = json.dumps(headers, separators=(",", ":"))
    query = urlencode(params)
    return f"{base_url.rstrip('/')}/ui/" + (f"?{query}" if query else "")
