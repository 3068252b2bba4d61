"""Real ACP agents from npm: pinned recipes, a cached install, and the offline environment for each.

Installs go to ``$ACP_BRIDGE_TEST_AGENTS_DIR`` (default ``~/.cache/acp-rest-bridge-test/npm``),
one prefix per agent, marked done by ``.ok-<version>``; a second run reuses them. Every failure
to install (no npm, no registry, a time-out) is an ``AgentUnavailable`` with the reason, which
tests turn into a skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.tiers import real_part

INSTALL_TIMEOUT = 300.0
# Variables that would point an agent at a real service or account: never passed on.
SCRUBBED_PREFIXES = ("ANTHROPIC", "CLAUDE", "OPENAI", "CODEX", "GEMINI", "GOOGLE", "OPENCODE", "AMP_")


class AgentUnavailable(Exception):
    pass


def cache_root() -> Path:
    configured = os.environ.get("ACP_BRIDGE_TEST_AGENTS_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "acp-rest-bridge-test" / "npm"


def home_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def claude_env(home: Path, llm_url: str) -> dict[str, str]:
    env = {
        **home_env(home),
        "ANTHROPIC_BASE_URL": llm_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if os.geteuid() == 0:
        # As root the Claude CLI refuses the permission flag the adapter passes unless told it is sandboxed.
        env["IS_SANDBOX"] = "1"
    return env


def _gemini_env(home: Path, llm_url: str) -> dict[str, str]:
    return {
        **home_env(home),
        "GOOGLE_GEMINI_BASE_URL": llm_url,  # selects the gateway auth: no login needed
        "GEMINI_API_KEY": "fake-key",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }


def _gemini_home(home: Path) -> None:
    settings = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))


@dataclass(frozen=True, slots=True)
class AgentRecipe:
    name: str
    package: str
    version: str
    bin: str  # inside the install prefix
    env: Callable[[Path, str], dict[str, str]]
    args: tuple[str, ...] = ()
    prepare_home: Callable[[Path], None] | None = None
    # The agent's own mode that asks for no permissions (used when the bridge cannot answer them).
    no_ask_mode: str | None = None
    # ACP client methods the bridge must not offer this agent (agents file `disabled_services`).
    disabled_services: tuple[str, ...] = ()
    # ACP client methods the agent calls when the bridge advertises them (else it uses its own tools).
    client_services: tuple[str, ...] = ()
    # Whether the agent tells the client what its shell printed (gemini-cli keeps it for the model).
    reports_shell_output: bool = True
    # The bridge profile of this kind of agent (agents file `profile`), if any.
    profile: str | None = None
    # The scripted steps of the default prompt.
    steps: tuple[str, ...] = ("think", "plan", "write", "edit", "read", "shell")

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    def prefix(self, root: Path | None = None) -> Path:
        return (root or cache_root()) / self.name

    def command(self, root: Path | None = None) -> list[str]:
        return [str(self.prefix(root) / self.bin), *self.args]

    def installed(self, root: Path | None = None) -> bool:
        return (self.prefix(root) / f".ok-{self.version}").is_file() and (self.prefix(root) / self.bin).exists()


RECIPES: dict[str, AgentRecipe] = {
    recipe.name: recipe
    for recipe in (
        AgentRecipe(
            name="claude-code",
            package="@zed-industries/claude-code-acp",
            version="0.16.2",
            bin="node_modules/.bin/claude-code-acp",
            env=claude_env,
            no_ask_mode="bypassPermissions",
            client_services=("fs/read_text_file", "fs/write_text_file", "terminal/create"),
            profile="claude",
        ),
        AgentRecipe(
            # The adapter the bridge installs for the legacy `claude` id: its tools run inside the
            # bundled Claude Code, so it calls none of the bridge's file or terminal services.
            name="claude-agent",
            package="@zed-industries/claude-agent-acp",
            version="0.23.1",
            bin="node_modules/.bin/claude-agent-acp",
            env=claude_env,
            no_ask_mode="bypassPermissions",
        ),
        AgentRecipe(
            name="gemini",
            package="@google/gemini-cli",
            version="0.61.0",
            bin="node_modules/.bin/gemini",
            args=("--acp", "--model", "gemini-2.5-flash"),
            env=_gemini_env,
            prepare_home=_gemini_home,
            no_ask_mode="yolo",
            # gemini-cli 0.61 reads a file through the client before writing it and takes the ACP
            # "resource not found" error for a failure, so it could never create a new file.
            disabled_services=("fs/read_text_file",),
            client_services=("fs/write_text_file",),
            reports_shell_output=False,
            profile="gemini",
        ),
    )
}


VERSIONS_VAR = "ACP_BRIDGE_TEST_AGENT_VERSIONS"


def asked_version(name: str) -> str | None:
    """The version ``ACP_BRIDGE_TEST_AGENT_VERSIONS`` asks for an agent: ``latest`` (all agents), or
    ``codex=2.5.0,gemini=latest`` (per agent); None when it names none for this one."""
    wanted = None
    for entry in os.environ.get(VERSIONS_VAR, "").split(","):
        agent, _, version = entry.strip().rpartition("=")
        if version and agent in ("", name):
            wanted = version
    return wanted


def published_version(package: str) -> str:
    """The newest published version of an npm package; AgentUnavailable when npm cannot tell."""
    npm = shutil.which("npm")
    if npm is None:
        raise AgentUnavailable("npm is not installed: cannot ask for the newest version")
    try:
        done = subprocess.run([npm, "view", package, "version"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        raise AgentUnavailable(f"npm view {package} version did not answer") from exc
    if done.returncode != 0 or not done.stdout.strip():
        raise AgentUnavailable(f"npm view {package} version failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def chosen(recipe: AgentRecipe) -> AgentRecipe:
    """The recipe at the version ``ACP_BRIDGE_TEST_AGENT_VERSIONS`` asks for (default: its own)."""
    wanted = asked_version(recipe.name)
    if wanted == "latest":
        wanted = published_version(recipe.package)
    return dataclasses.replace(recipe, version=wanted) if wanted else recipe


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes (test runs of other checkouts share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@real_part("realagents")
def install(recipe: AgentRecipe, root: Path | None = None, timeout: float = INSTALL_TIMEOUT) -> list[str]:
    """Install ``recipe`` (once; later calls reuse it) and return the argv that starts the agent."""
    root = root or cache_root()
    prefix = recipe.prefix(root)
    with locked(root / f".{recipe.name}.lock"):
        if recipe.installed(root):
            return recipe.command(root)
        from tests.support import ensure_node

        failure = ensure_node()  # the suite installs Node.js where the machine has none
        npm = shutil.which("npm")
        if npm is None:
            raise AgentUnavailable(f"npm is not installed: {failure}")
        if shutil.which("node") is None:
            raise AgentUnavailable("node is not installed")
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        argv = [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--ignore-scripts",  # nothing the agents need is built at install time
            "--loglevel=error",
            "--fetch-retries=1",
            "--fetch-retry-mintimeout=1000",
            "--fetch-retry-maxtimeout=5000",
            "--fetch-timeout=60000",
            "--prefix",
            str(prefix),
            recipe.spec,
        ]
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=prefix)
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(prefix, ignore_errors=True)
            raise AgentUnavailable(f"npm install {recipe.spec} did not finish in {timeout:.0f}s") from exc
        if done.returncode != 0:
            shutil.rmtree(prefix, ignore_errors=True)
            tail = (done.stderr or done.stdout).strip()[-500:]
            raise AgentUnavailable(f"npm install {recipe.spec} failed ({done.returncode}): {tail}")
        if not (prefix / recipe.bin).exists():
            raise AgentUnavailable(f"npm install {recipe.spec} gave no {recipe.bin}")
        seconds = time.monotonic() - started
        (prefix / f".ok-{recipe.version}").write_text(json.dumps({"seconds": round(seconds, 1)}))
        return recipe.command(root)


def scrubbed_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(SCRUBBED_PREFIXES)}
