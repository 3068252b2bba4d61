"""Known agents: the legacy ids (claude, codex, opencode, amp, mock) and those of the agents file.

Agents file (TOML)::

    [agents.probe]
    command = ["python3", "/abs/path/probe_agent.py", "--flag"]
    env = { PROBE_MODE = "fast" }
    disabled_services = ["fs/read_text_file"]   # ACP client methods not offered to this agent
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import InstallFailed, UnsupportedAgent

from .install import Installer, installed_command, installed_version
from .node import OnDemandNode

CAPABILITY_KEYS = (
    "planMode",
    "permissions",
    "questions",
    "toolCalls",
    "toolResults",
    "textMessages",
    "images",
    "fileAttachments",
    "sessionLifecycle",
    "errorEvents",
    "reasoning",
    "status",
    "commandExecution",
    "fileChanges",
    "mcpTools",
    "streamingDeltas",
    "itemStarted",
    "sharedProcess",
)


def _caps(true_keys: str) -> dict[str, bool]:
    on = set(true_keys.split())
    unknown = on - set(CAPABILITY_KEYS)
    assert not unknown, unknown
    return {key: key in on for key in CAPABILITY_KEYS}


# The legacy table (behavior §9.2), per legacy agent id.
LEGACY_CAPABILITIES: dict[str, dict[str, bool]] = {
    "claude": _caps("permissions questions toolCalls toolResults textMessages mcpTools streamingDeltas"),
    "codex": _caps(" ".join(k for k in CAPABILITY_KEYS if k != "questions")),
    "opencode": _caps(
        "toolCalls toolResults textMessages images fileAttachments sessionLifecycle errorEvents "
        "mcpTools streamingDeltas itemStarted sharedProcess"
    ),
    "amp": _caps("toolCalls toolResults textMessages errorEvents mcpTools"),
    "mock": _caps(" ".join(k for k in CAPABILITY_KEYS if k != "sharedProcess")),
}

# What any ACP agent gives a legacy client through this bridge; refined from `initialize` once known.
ACP_CAPABILITIES = _caps(
    "planMode permissions questions toolCalls toolResults textMessages fileAttachments sessionLifecycle "
    "errorEvents reasoning status commandExecution fileChanges mcpTools streamingDeltas itemStarted"
)

LEGACY_MODES: dict[str, list[dict[str, str]]] = {
    "claude": [
        {"id": "build", "name": "Build", "description": "Default build mode"},
        {"id": "plan", "name": "Plan", "description": "Plan mode (prompt-only)"},
    ],
    "codex": [
        {"id": "build", "name": "Build", "description": "Default build mode"},
        {"id": "plan", "name": "Plan", "description": "Planning mode via prompt prefix"},
    ],
    "opencode": [
        {"id": "build", "name": "Build", "description": "Default build mode"},
        {"id": "plan", "name": "Plan", "description": "Planning mode"},
        {"id": "custom", "name": "Custom", "description": "Any user-defined OpenCode agent name"},
    ],
    "amp": [{"id": "build", "name": "Build", "description": "Default build mode"}],
    "mock": [
        {"id": "build", "name": "Build", "description": "Mock agent for UI testing"},
        {"id": "plan", "name": "Plan", "description": "Plan-only mock mode"},
    ],
}

LEGACY_MODELS: dict[str, dict[str, Any]] = {
    "mock": {"models": [{"id": "mock", "name": "Mock"}], "defaultModel": "mock"},
    "amp": {"models": [{"id": "amp-default", "name": "Amp Default"}], "defaultModel": "amp-default"},
    "claude": {
        "models": [
            {"id": "default", "name": "Default (recommended)"},
            {"id": "sonnet", "name": "Sonnet"},
            {"id": "opus", "name": "Opus"},
            {"id": "haiku", "name": "Haiku"},
        ],
        "defaultModel": "default",
    },
}

# Which agent modes and permission modes each legacy agent accepts (behavior §4.2).
LEGACY_AGENT_MODES: dict[str, set[str] | None] = {
    "mock": {"build", "plan"},
    "claude": {"build", "plan"},
    "codex": {"build", "plan"},
    "amp": {"build"},
    "opencode": None,  # any string: an OpenCode agent name
}
LEGACY_PERMISSION_MODES: dict[str, set[str]] = {
    "mock": {"default", "plan", "bypass"},
    "claude": {"default", "plan", "bypass", "acceptEdits"},
    "codex": {"default", "plan", "bypass", "acceptEdits"},
    "amp": {"default", "bypass"},
    "opencode": {"default"},
}

CREDENTIAL_VARS = {
    "anthropic": ("ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
    "openai": ("OPENAI_API_KEY", "CODEX_API_KEY"),
}

LEGACY_IDS = ("claude", "codex", "opencode", "amp", "mock")

# ACP adapters that serve the legacy ids: one installed in the install dir (install.py), else the first
# of these that resolves on PATH.
LEGACY_COMMANDS: dict[str, list[list[str]]] = {
    "claude": [["claude-agent-acp"], ["claude-code-acp"]],
    "codex": [["codex-acp"]],
    "opencode": [["opencode", "acp"]],
    "amp": [["amp-acp"]],
}


def mock_command() -> list[str]:
    return [sys.executable, "-m", "app.agents.mock"]


@dataclass(slots=True)
class AgentSpec:
    id: str
    command: list[str] | None
    env: dict[str, str] = field(default_factory=dict)
    legacy: bool = False
    capabilities: dict[str, bool] = field(default_factory=lambda: dict(ACP_CAPABILITIES))
    # ACP client methods (e.g. "fs/read_text_file") neither advertised to nor answered for this agent.
    disabled_services: frozenset[str] = frozenset()
    # Learned from the agent's last `initialize`/`session/new` (ACP modes and models are session-scoped).
    version: str | None = None
    modes: list[dict[str, str]] | None = None
    models: dict[str, Any] | None = None

    @property
    def is_mock(self) -> bool:
        return self.id == "mock"

    def resolved_path(self) -> str | None:
        if not self.command:
            return None
        exe = self.command[0]
        if os.path.isabs(exe):
            return exe if os.access(exe, os.X_OK) else None
        return shutil.which(exe)

    @property
    def installed(self) -> bool:
        return self.is_mock or self.resolved_path() is not None

    def credentials_available(self) -> bool:
        def has(group: str) -> bool:
            return any(os.environ.get(var) for var in CREDENTIAL_VARS[group])

        if self.id in ("claude", "amp"):
            return has("anthropic")
        if self.id == "codex":
            return has("openai")
        if self.id == "opencode":
            return has("anthropic") or has("openai")
        return True  # mock and custom agents: the bridge cannot tell, and asks for nothing

    def learn(self, initialize: dict[str, Any], new_session: dict[str, Any]) -> None:
        """Keep what a started session told about the agent, for /v1/agents and its modes/models."""
        info = initialize.get("agentInfo")
        if isinstance(info, dict) and isinstance(info.get("version"), str) and not self.is_mock:
            self.version = info["version"]
        if self.legacy:
            return  # the legacy table stays authoritative for the legacy ids
        caps = initialize.get("agentCapabilities")
        prompt = caps.get("promptCapabilities") if isinstance(caps, dict) else None
        if isinstance(prompt, dict):
            self.capabilities["images"] = bool(prompt.get("image"))
        modes = new_session.get("modes")
        if isinstance(modes, dict) and isinstance(modes.get("availableModes"), list):
            self.modes = [
                {
                    "id": str(m.get("id")),
                    "name": str(m.get("name", m.get("id"))),
                    "description": str(m.get("description") or ""),
                }
                for m in modes["availableModes"]
                if isinstance(m, dict) and m.get("id")
            ]
        for option in new_session.get("configOptions") or []:
            if (
                isinstance(option, dict)
                and option.get("category") == "model"
                and isinstance(option.get("options"), list)
            ):
                models = [
                    {"id": str(o["value"]), "name": str(o.get("name", o["value"]))}
                    for o in option["options"]
                    if isinstance(o, dict) and "value" in o
                ]
                self.models = {"models": models}
                if isinstance(option.get("currentValue"), str):
                    self.models["defaultModel"] = option["currentValue"]

    def allowed_agent_modes(self) -> set[str] | None:
        """None means any mode string is passed through."""
        if self.legacy:
            return LEGACY_AGENT_MODES[self.id]
        return None

    def allowed_permission_modes(self) -> set[str]:
        if self.legacy:
            return LEGACY_PERMISSION_MODES[self.id]
        return {"default", "plan", "bypass", "acceptEdits"}


class AgentsFileError(ValueError):
    pass


def load_agents_file(path: Path) -> list[AgentSpec]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AgentsFileError(f"cannot read agents file {path}: {exc}") from exc
    table = data.get("agents", {})
    if not isinstance(table, dict):
        raise AgentsFileError(f"{path}: [agents] must be a table")
    specs: list[AgentSpec] = []
    for agent_id, entry in table.items():
        if agent_id in LEGACY_IDS:
            raise AgentsFileError(f"{path}: agent id {agent_id!r} is reserved")
        command = entry.get("command") if isinstance(entry, dict) else None
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise AgentsFileError(f"{path}: agents.{agent_id}.command must be a non-empty list of strings")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise AgentsFileError(f"{path}: agents.{agent_id}.env must be a table of strings")
        disabled = entry.get("disabled_services", [])
        if not isinstance(disabled, list) or not all(isinstance(m, str) for m in disabled):
            raise AgentsFileError(f"{path}: agents.{agent_id}.disabled_services must be a list of method names")
        specs.append(AgentSpec(agent_id, list(command), dict(env), disabled_services=frozenset(disabled)))
    return specs


class AgentRegistry:
    def __init__(
        self,
        agents_file: Path | None = None,
        install_dir: Path | None = None,
        install_timeout: float = 600.0,
        node: OnDemandNode | None = None,
    ) -> None:
        self.install_dir = install_dir
        self.installer = Installer(install_dir, install_timeout, node) if install_dir is not None else None
        self._agents: dict[str, AgentSpec] = {}
        for agent_id in LEGACY_IDS:
            self._agents[agent_id] = AgentSpec(
                agent_id,
                mock_command() if agent_id == "mock" else self._legacy_command(agent_id),
                legacy=True,
                capabilities=dict(LEGACY_CAPABILITIES[agent_id]),
            )
        if agents_file is not None:
            for spec in load_agents_file(agents_file):
                self._agents[spec.id] = spec

    def _legacy_command(self, agent_id: str) -> list[str]:
        installed = installed_command(self.install_dir, agent_id)
        if installed is not None:
            return installed
        candidates = LEGACY_COMMANDS[agent_id]
        for candidate in candidates:
            if shutil.which(candidate[0]):
                return candidate
        return candidates[0]

    def get(self, agent_id: str) -> AgentSpec:
        spec = self._agents.get(agent_id)
        if spec is None:
            raise UnsupportedAgent(agent_id)
        if spec.legacy and not spec.is_mock:
            # Re-resolve: an adapter installed after start-up is picked up.
            spec.command = self._legacy_command(agent_id)
            if spec.version is None:
                spec.version = installed_version(self.install_dir, agent_id)
        return spec

    def all(self) -> list[AgentSpec]:
        return [self.get(agent_id) for agent_id in self._agents]

    def can_install(self, spec: AgentSpec) -> bool:
        return spec.legacy and self.installer is not None and self.installer.can_install(spec.id)

    async def install(self, spec: AgentSpec, version: str | None = None, *, reinstall: bool = False) -> None:
        """Legacy §9.3: an agent that resolves is left alone unless ``reinstall``; raises InstallFailed."""
        if spec.is_mock:
            self._write_mock_placeholder()
            return
        if spec.installed and not reinstall:
            return
        if not self.can_install(spec):
            command = " ".join(spec.command or [])
            raise InstallFailed(spec.id, f"no installer for {spec.id}: put its ACP adapter ({command}) on PATH")
        assert self.installer is not None
        await self.installer.install(spec.id, version, reinstall=reinstall)
        spec.version = None  # read again from what is installed now
        self.get(spec.id)

    def _write_mock_placeholder(self) -> None:
        placeholder = self.mock_placeholder()
        if placeholder is None:
            return
        try:
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholder.write_text("#!/bin/sh\n# placeholder: the mock agent is built in\n")
        except OSError as exc:
            raise InstallFailed("mock", str(exc)) from exc

    def mock_placeholder(self) -> Path | None:
        return None if self.install_dir is None else self.install_dir / "mock"
