"""Known agents: the legacy ids (claude, codex, opencode, amp, mock), those of the agents file, then
the agents of the ACP registry's catalog (``acp_catalog``; an id already taken is not shadowed).

Agents file (TOML)::

    [agents.probe]
    command = ["python3", "/abs/path/probe_agent.py", "--flag"]
    env = { PROBE_MODE = "fast" }
    disabled_services = ["fs/read_text_file"]   # ACP client methods not offered to this agent
    profile = "codex"                           # optional: what the bridge knows of this kind of
                                                # agent (app/agents/profiles.py); default "generic"
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import InstallFailed, UnsupportedAgent
from app.metrics import Metrics
from app.process_group import Recorder

from .acp_catalog import CatalogAgent, CatalogSource
from .catalog_install import CatalogInstaller, agent_env, recorded_env
from .install import Installer, installed_command, installed_version, package_version_of
from .install_core import InstallCore
from .node import OnDemandNode, script_node
from .profiles import GENERIC, LEGACY_IDS, PROFILES, AgentProfile, profile_for, profile_for_catalog

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

# Derived from the profiles (app/agents/profiles.py), kept under their legacy names.
LEGACY_MODES: dict[str, list[dict[str, str]]] = {
    i: [dict(m) for m in PROFILES[i].legacy_modes or ()] for i in LEGACY_IDS
}
LEGACY_MODELS: dict[str, dict[str, Any]] = {
    i: fallback for i in ("mock", "amp", "claude") if (fallback := PROFILES[i].fallback_models) is not None
}
LEGACY_COMMANDS: dict[str, list[list[str]]] = {
    i: [list(c) for c in PROFILES[i].commands] for i in LEGACY_IDS if PROFILES[i].commands
}


def mock_command() -> list[str]:
    return [sys.executable, "-m", "app.agents.mock"]


def option_values(option: dict[str, Any]) -> list[dict[str, Any]]:
    """A select config option's choices, flat (grouped lists are flattened)."""
    out: list[dict[str, Any]] = []
    for entry in option.get("options") or []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("options"), list):
            out.extend(o for o in entry["options"] if isinstance(o, dict) and "value" in o)
        elif "value" in entry:
            out.append(entry)
    return out


def find_option(options: Any, category: str) -> dict[str, Any] | None:
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and option.get("category") == category:
            return option
    return None


def models_of(new_session: dict[str, Any]) -> dict[str, Any] | None:
    """The legacy models list from a session/new (or set_config_option) result: the `model` config
    option, else the older `models` field."""
    option = find_option(new_session.get("configOptions"), "model")
    if option is not None:
        models = [{"id": str(o["value"]), "name": str(o.get("name", o["value"]))} for o in option_values(option)]
        found: dict[str, Any] = {"models": models}
        if isinstance(option.get("currentValue"), str):
            found["defaultModel"] = option["currentValue"]
        return found if models else None
    legacy = new_session.get("models")
    if isinstance(legacy, dict) and isinstance(legacy.get("availableModels"), list):
        models = [
            {"id": str(m["modelId"]), "name": str(m.get("name", m["modelId"]))}
            for m in legacy["availableModels"]
            if isinstance(m, dict) and m.get("modelId")
        ]
        found = {"models": models}
        if isinstance(legacy.get("currentModelId"), str):
            found["defaultModel"] = legacy["currentModelId"]
        return found if models else None
    return None


def modes_of(new_session: dict[str, Any]) -> list[dict[str, str]] | None:
    """The agent's own modes: the `mode` config option, else `modes`."""
    option = find_option(new_session.get("configOptions"), "mode")
    if option is not None:
        return [
            {
                "id": str(o["value"]),
                "name": str(o.get("name", o["value"])),
                "description": str(o.get("description") or ""),
            }
            for o in option_values(option)
        ]
    modes = new_session.get("modes")
    if isinstance(modes, dict) and isinstance(modes.get("availableModes"), list):
        return [
            {
                "id": str(m.get("id")),
                "name": str(m.get("name", m.get("id"))),
                "description": str(m.get("description") or ""),
            }
            for m in modes["availableModes"]
            if isinstance(m, dict) and m.get("id")
        ]
    return None


def _env_has(env: dict[str, str], names: tuple[str, ...]) -> bool:
    return any(env.get(name) for name in names)


def _env_var_names(method: dict[str, Any]) -> list[str]:
    if method.get("type") != "env_var" or not isinstance(method.get("vars"), list):
        return []
    return [
        str(v["name"])
        for v in method["vars"]
        if isinstance(v, dict) and isinstance(v.get("name"), str) and not v.get("optional")
    ]


def _file_exists(template: str, env: dict[str, str]) -> bool:
    """``$VAR/...`` (skipped when VAR is unset) or ``~/...`` exists."""
    if template.startswith("$"):
        var, _, rest = template[1:].partition("/")
        if not env.get(var):
            return False
        path = os.path.join(env[var], rest)
    else:
        path = os.path.expanduser(template)
    return os.path.isfile(path)


@dataclass(slots=True)
class AgentSpec:
    id: str
    command: list[str] | None
    env: dict[str, str] = field(default_factory=dict)
    legacy: bool = False
    capabilities: dict[str, bool] = field(default_factory=lambda: dict(ACP_CAPABILITIES))
    # ACP client methods (e.g. "fs/read_text_file") neither advertised to nor answered for this agent.
    disabled_services: frozenset[str] = frozenset()
    profile: AgentProfile = GENERIC
    # Learned from the agent's last `initialize`/`session/new` (ACP modes and models are session-scoped).
    version: str | None = None
    modes: list[dict[str, str]] | None = None
    models: dict[str, Any] | None = None
    auth_methods: list[dict[str, Any]] | None = None
    # Whether its last session started (True) or it refused one for lack of credentials (False).
    started_with_credentials: bool | None = None
    # Which copy of a legacy agent runs: "installed" (by the bridge, in its install dir) or "path"
    # (found on PATH); and the copy it hides, if any ({"source", "path", "version"}).
    source: str | None = None
    hidden_copy: dict[str, str] | None = None
    # The ACP registry's entry, for an agent of its catalog (run with the profile its package or
    # program matches, else the generic one).
    catalog_entry: CatalogAgent | None = None

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

    def node_program(self) -> str | None:
        """The Node.js program this agent runs with (the bridge's own, or the system's for a
        ``#!/usr/bin/env node`` script); None when it is not a Node.js program, or not installed."""
        path = self.resolved_path()
        if path is None or self.is_mock:
            return None
        return script_node(path, self.environment().get("PATH"))

    def environment(self) -> dict[str, str]:
        """The environment the agent runs with: the server's plus the agent's own."""
        return {**os.environ, **self.env}

    def usable_auth_method(self, methods: Any, env: dict[str, str] | None = None) -> str | None:
        """The id of the first ACP auth method the agent lists that the environment satisfies (per
        the profile, or the variables an `env_var` method names); a key in a variable is preferred to
        a login file."""
        env = self.environment() if env is None else env
        listed = [m for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []
        listed = [m for m in listed if m.get("type") != "terminal"]
        for method in listed:
            needs = self.profile.auth_methods.get(str(method.get("id")))
            if needs and _env_has(env, needs):
                return str(method["id"])
            required = _env_var_names(method)  # ACP `env_var` methods name their variables
            if required and all(env.get(name) for name in required):
                return str(method["id"])
        for method in listed:
            files = self.profile.auth_method_files.get(str(method.get("id")), ())
            if any(_file_exists(path, env) for path in files):
                return str(method["id"])
        return None

    def credential_variables(self) -> list[str]:
        """Variables any one of which would give the agent credentials."""
        names = list(dict.fromkeys(v for needs in self.profile.auth_methods.values() for v in needs))
        for method in self.auth_methods or []:
            names += [v for v in _env_var_names(method) if v not in names]
        names += [v for v in self.profile.credential_env if v not in names]
        return names

    def credentials_available(self) -> bool:
        """True when the agent would have credentials: an auth method it offers (or, before it was
        asked, any the profile knows) that the environment satisfies, a variable, or a login file.
        For an agent the bridge has no profile for, what the agent said: no auth methods, or an
        ``env_var`` one whose variables are set (or its last session's start, when it named none the
        bridge can check); a registry agent that was never started has told nothing: False."""
        env = self.environment()
        profile = self.profile
        if not (profile.auth_methods or profile.credential_env or profile.credential_files):
            if self.is_mock:
                return True
            if self.auth_methods is not None:
                if any(_env_var_names(m) for m in self.auth_methods):
                    return self.usable_auth_method(self.auth_methods, env) is not None
                if not self.auth_methods:
                    return True  # it asks for nothing
            if self.started_with_credentials is not None:
                return self.started_with_credentials
            return self.catalog_entry is None  # an agents-file entry: the server's env is the user's choice
        if self.auth_methods and profile.auth_methods:
            if self.usable_auth_method(self.auth_methods, env) is not None:
                return True
        elif any(_env_has(env, needs) for needs in profile.auth_methods.values()):
            return True
        if _env_has(env, profile.credential_env) and not profile.auth_methods:
            return True
        return any(_file_exists(path, env) for path in profile.credential_files)

    def learn(self, initialize: dict[str, Any], new_session: dict[str, Any]) -> None:
        """Keep what a started session told about the agent, for /v1/agents and its modes/models."""
        info = initialize.get("agentInfo")
        if isinstance(info, dict) and isinstance(info.get("version"), str) and not self.is_mock:
            self.version = info["version"]
        if isinstance(initialize.get("authMethods"), list):
            self.auth_methods = [m for m in initialize["authMethods"] if isinstance(m, dict)]
        self.learn_options(new_session)
        if self.legacy:
            return  # the legacy capability table stays authoritative for the legacy ids
        caps = initialize.get("agentCapabilities")
        prompt = caps.get("promptCapabilities") if isinstance(caps, dict) else None
        if isinstance(prompt, dict):
            self.capabilities["images"] = bool(prompt.get("image"))

    def learn_options(self, result: dict[str, Any], *, refresh: bool = False) -> None:
        """Models and modes from a session/new result or (``refresh``) a session's config option
        update, whose current model is that session's choice, not the agent's default."""
        if self.is_mock:
            return
        models = models_of(result)
        if models is not None:
            if refresh and self.models is not None:
                if "defaultModel" in self.models:
                    models["defaultModel"] = self.models["defaultModel"]
                else:
                    models.pop("defaultModel", None)
            self.models = models
        modes = modes_of(result)
        if modes is not None:
            self.modes = modes

    def models_response(self) -> dict[str, Any]:
        """/v1/agents/{id}/models: what the agent reported, else the profile's fallback."""
        return self.models or self.profile.fallback_models or {"models": []}

    def modes_response(self) -> list[dict[str, str]]:
        """/v1/agents/{id}/modes: the agent's own modes when they are agent modes, else legacy's."""
        legacy = [dict(m) for m in self.profile.legacy_modes or ()]
        if self.modes and self.profile.modes_are_agent_modes:
            modes = [dict(m) for m in self.modes]
            if any(m["id"] == "custom" for m in legacy):  # opencode: any agent name is accepted too
                modes.append(next(m for m in legacy if m["id"] == "custom"))
            return modes
        return legacy or [{"id": "build", "name": "Build", "description": "Default build mode"}]

    def allowed_agent_modes(self) -> set[str] | None:
        """None means any mode string is passed through (checked against the agent's list later)."""
        modes = self.profile.agent_modes
        return None if modes is None else set(modes)

    def allowed_permission_modes(self) -> set[str]:
        return set(self.profile.permission_modes)


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
        profile = entry.get("profile", "generic")
        if profile not in PROFILES or profile == "mock":
            names = ", ".join(sorted(p for p in PROFILES if p != "mock"))
            raise AgentsFileError(f"{path}: agents.{agent_id}.profile must be one of {names}")
        chosen = profile_for(profile)
        specs.append(
            AgentSpec(
                agent_id,
                list(command),
                dict(env),
                disabled_services=frozenset(disabled) | chosen.disabled_services,
                profile=chosen,
            )
        )
    return specs


class AgentRegistry:
    # Seconds an agent's resolution (which copy runs, its version: PATH lookups and stats) and the
    # agents list made of it are kept: a list or a create in a burst of requests resolves once.
    RESOLVE_TTL = 1.0

    def __init__(
        self,
        agents_file: Path | None = None,
        install_dir: Path | None = None,
        install_timeout: float = 600.0,
        node: OnDemandNode | None = None,
        processes: Recorder | None = None,
        metrics: Metrics | None = None,
        catalog: CatalogSource | None = None,
    ) -> None:
        self.install_dir = install_dir
        self.metrics = metrics  # installs by outcome
        # What the two installers share: locks, the time limit, running steps, crash records.
        self.installs = InstallCore(install_dir, install_timeout, node, processes) if install_dir is not None else None
        self.installer = Installer(self.installs) if self.installs is not None else None
        self.catalog = catalog
        self.catalog_installer = (
            CatalogInstaller(self.installs, allow_http=catalog is not None and catalog.allow_http)
            if self.installs is not None
            else None
        )
        # Specs of catalog agents, kept across catalog refreshes (what a session learned stays).
        self._catalog_specs: dict[str, AgentSpec] = {}
        self._refresh: asyncio.Task[bool] | None = None
        self._resolved: dict[str, float] = {}  # legacy agent id -> when it was last resolved
        # (when, the generation and catalog it was made in, the list made)
        self._listing: tuple[float, int, object, Any] | None = None
        self.generation = 0  # changed by installs: what was resolved before is resolved again
        self._agents: dict[str, AgentSpec] = {}
        for agent_id in LEGACY_IDS:
            self._agents[agent_id] = AgentSpec(
                agent_id,
                mock_command() if agent_id == "mock" else self._legacy_command(agent_id)[0],
                legacy=True,
                capabilities=dict(LEGACY_CAPABILITIES[agent_id]),
                profile=PROFILES[agent_id],
                disabled_services=PROFILES[agent_id].disabled_services,
            )
        if agents_file is not None:
            for spec in load_agents_file(agents_file):
                self._agents[spec.id] = spec

    def _legacy_command(self, agent_id: str) -> tuple[list[str], str | None, dict[str, str] | None]:
        """The command of a legacy agent, which copy it is, and the copy on PATH it hides: the
        bridge's own install wins over one on PATH."""
        installed = installed_command(self.install_dir, agent_id)
        on_path: tuple[list[str], str] | None = None
        for candidate in LEGACY_COMMANDS[agent_id]:
            found = shutil.which(candidate[0])
            if found:
                on_path = (list(candidate), found)
                break
        if installed is not None:
            hidden = None
            if on_path is not None:
                hidden = {"source": "path", "path": on_path[1]}
                version = package_version_of(on_path[1], agent_id)
                if version is not None:
                    hidden["version"] = version
            return installed, "installed", hidden
        if on_path is not None:
            return on_path[0], "path", None
        return list(LEGACY_COMMANDS[agent_id][0]), None, None

    def get(self, agent_id: str) -> AgentSpec:
        spec = self._agents.get(agent_id)
        if spec is None:
            entry = self.catalog.catalog.get(agent_id) if self.catalog is not None else None
            if entry is None:
                raise UnsupportedAgent(agent_id)
            return self._catalog_spec(entry)
        if spec.legacy and not spec.is_mock:
            now = time.monotonic()
            if now - self._resolved.get(agent_id, -self.RESOLVE_TTL) < self.RESOLVE_TTL:
                return spec
            self._resolved[agent_id] = now
            # Re-resolve: an adapter installed after start-up is picked up.
            command, source, hidden = self._legacy_command(agent_id)
            if command != spec.command:
                spec.version = None  # another copy: its version is read again
            spec.command, spec.source, spec.hidden_copy = command, source, hidden
            if spec.version is None:
                if source == "installed":
                    spec.version = installed_version(self.install_dir, agent_id)
                elif source == "path" and (path := spec.resolved_path()) is not None:
                    spec.version = package_version_of(path, agent_id)
        return spec

    async def resolve(self, agent_id: str) -> AgentSpec:
        """``get``; an id no list has yet, while the registry's catalog was never fetched, is looked
        for again once it is (a create right after start names an agent the snapshot lacks)."""
        try:
            return self.get(agent_id)
        except UnsupportedAgent:
            if self.catalog is None or not self.catalog.due() or self.catalog.refreshed_at is not None:
                raise
        self.refresh_catalog()
        if self._refresh is not None:
            await asyncio.shield(self._refresh)
        return self.get(agent_id)

    def listing(self) -> Any:
        """What ``keep_listing`` kept within ``RESOLVE_TTL``, since the last install and of the
        catalog in use (None: nothing)."""
        kept = self._listing
        if (
            kept is None
            or kept[1] != self.generation
            or kept[2] is not self._catalog_in_use()
            or time.monotonic() - kept[0] >= self.RESOLVE_TTL
        ):
            return None
        return kept[3]

    def keep_listing(self, value: Any) -> None:
        self._listing = (time.monotonic(), self.generation, self._catalog_in_use(), value)

    def _catalog_in_use(self) -> object:
        return self.catalog.catalog if self.catalog is not None else None

    def changed(self) -> None:
        """An install changed what is there: everything is resolved again."""
        self.generation += 1
        self._resolved.clear()
        self._listing = None

    def all(self) -> list[AgentSpec]:
        """The legacy ids, the agents file's, then the catalog's (those with an id not taken)."""
        specs = [self.get(agent_id) for agent_id in self._agents]
        return specs + self.catalog_agents()

    def configured(self) -> list[AgentSpec]:
        """The legacy ids and the agents file's (not the catalog's)."""
        return [self.get(agent_id) for agent_id in self._agents]

    def refresh_catalog(self) -> None:
        """Refresh the catalog from its URL in the background, when it is due (never waits)."""
        if self.catalog is None or not self.catalog.due():
            return
        if self._refresh is not None and not self._refresh.done():
            return
        self._refresh = asyncio.get_running_loop().create_task(self.catalog.refresh(), name="acp-registry-refresh")

    def stop_refresh(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()

    def catalog_agents(self) -> list[AgentSpec]:
        if self.catalog is None:
            return []
        return [self._catalog_spec(entry) for entry in self.catalog.catalog.agents if entry.id not in self._agents]

    def _catalog_spec(self, entry: CatalogAgent) -> AgentSpec:
        spec = self._catalog_specs.get(entry.id)
        if spec is None:
            spec = self._catalog_specs[entry.id] = AgentSpec(entry.id, None)
        spec.catalog_entry = entry  # the newest catalog's
        # An agent the bridge has a profile for runs with it (names, modes, auth, workarounds).
        spec.profile = profile_for_catalog(entry.package_names(), entry.program_names())
        spec.disabled_services = spec.profile.disabled_services
        installed = self.catalog_installer.installed(entry.id) if self.catalog_installer is not None else None
        if installed is not None:
            spec.command = list(installed["command"])
            if spec.version is None and isinstance(installed.get("version"), str):
                spec.version = installed["version"]
        else:
            spec.command = None
        # The environment recorded at its install, not the newest catalog's (which applies after a reinstall).
        spec.env = recorded_env(installed) if installed is not None else dict(agent_env(entry))
        return spec

    def can_install(self, spec: AgentSpec) -> bool:
        if spec.catalog_entry is not None:
            return self.catalog_installer is not None and spec.catalog_entry.distribution is not None
        return spec.legacy and self.installer is not None and self.installer.can_install(spec.id)

    async def install(self, spec: AgentSpec, version: str | None = None, *, reinstall: bool = False) -> None:
        """Legacy §9.3: an agent that resolves is left alone unless ``reinstall``; raises InstallFailed."""
        try:
            await self._install(spec, version, reinstall=reinstall)
        finally:
            self.changed()

    async def _install(self, spec: AgentSpec, version: str | None, *, reinstall: bool) -> None:
        if spec.is_mock:
            self._write_mock_placeholder()
            return
        if spec.installed and not reinstall:
            return
        if spec.catalog_entry is not None and self.catalog_installer is not None:
            await self.catalog_installer.install(spec.catalog_entry, version, reinstall=reinstall)
            spec.version = None  # read again from what is installed now
            self._catalog_spec(spec.catalog_entry)
            return
        if not self.can_install(spec):
            command = " ".join(spec.command or [])
            raise InstallFailed(spec.id, f"no installer for {spec.id}: put its ACP adapter ({command}) on PATH")
        assert self.installer is not None
        try:
            await self.installer.install(spec.id, version, reinstall=reinstall)
        except BaseException as exc:
            if self.metrics is not None:
                self.metrics.install(spec.id, "failed" if isinstance(exc, Exception) else "cancelled")
            raise
        if self.metrics is not None:
            self.metrics.install(spec.id, "installed")
        spec.version = None  # read again from what is installed now
        self._resolved.pop(spec.id, None)
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
