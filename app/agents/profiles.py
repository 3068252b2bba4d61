"""What the bridge knows about each kind of ACP agent, as data: one profile per legacy id (plus
``gemini`` and ``generic``), reusable by agents-file entries (``profile = "codex"``).

A profile says how the agent is installed and started, which of its ACP ``authMethods`` the
environment can satisfy, how the legacy ``agentMode``/``permissionMode`` map onto the agent's own
modes, which legacy model names mean which of its models, how to name its tools and where its tool
output text is. Adding an agent is adding an entry here; the code that applies a profile is
``app.sessions.agent_setup`` (modes, models, auth) and ``app.translate.tools`` (names, output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class EarlierPackage:
    """The name an adapter was published under before it moved (its versions up to ``last``)."""

    package: str
    last: str
    # A platform binary to start instead of the npm wrapper (which would orphan it when stopped).
    native: str | None = None


@dataclass(frozen=True, slots=True)
class NpmAdapter:
    package: str
    # The newest version the project has tested: the default install. A session's `agentVersion`
    # (or the install's) picks any other published one.
    version: str
    bin: str  # its program in node_modules/.bin
    args: tuple[str, ...] = ()
    # opencode's install script links its platform binary into place; the others need no scripts.
    run_scripts: bool = False
    # A platform binary to start instead of the npm wrapper (which would orphan it when stopped).
    native: str | None = None
    # Older versions published under another name (the adapters left @zed-industries in 2026).
    earlier: tuple[EarlierPackage, ...] = ()

    def package_for(self, version: str) -> EarlierPackage | None:
        """The earlier package that holds ``version`` (None: the current name holds it)."""
        wanted = version_key(version)
        if wanted is None:
            return None  # a tag ("latest") or a range: today's name
        for earlier in self.earlier:
            last = version_key(earlier.last)
            if last is not None and wanted <= last:
                return earlier
        return None

    def spec(self, version: str) -> str:
        earlier = self.package_for(version)
        return f"{earlier.package if earlier else self.package}@{version}"

    @property
    def packages(self) -> tuple[str, ...]:
        return (self.package, *(e.package for e in self.earlier))

    @property
    def natives(self) -> tuple[str, ...]:
        found = (self.native, *(e.native for e in self.earlier))
        return tuple(n for n in found if n)


def version_key(version: str) -> tuple[int, int, int] | None:
    """``1.2.3`` (a pre-release suffix ignored) as a comparable tuple; None for tags and ranges."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.-]*)?", version.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


@dataclass(frozen=True, slots=True)
class ModeTarget:
    """What a legacy mode means for the agent: one of its own modes (chosen through
    ``session/set_mode`` or the ``mode`` config option, whichever it offers) and/or a prompt prefix.

    ``mode`` and then ``alternatives`` are candidates, best first: the first the agent offers is
    set, so versions that renamed their modes all work (codex ``full-access`` / ``agent-full-access``)."""

    mode: str | None = None
    prompt_prefix: str | None = None
    # The agent refuses this mode when the server runs as root (a 400 at create, as legacy).
    refused_as_root: bool = False
    alternatives: tuple[str, ...] = ()

    @property
    def candidates(self) -> tuple[str, ...]:
        return (self.mode, *self.alternatives) if self.mode is not None else ()


@dataclass(frozen=True, slots=True)
class AgentProfile:
    id: str
    # Programs that serve this agent when found on PATH, best first.
    commands: tuple[tuple[str, ...], ...] = ()
    npm: NpmAdapter | None = None
    # Other npm or PyPI packages, and programs of binary archives, that are this kind of agent: an
    # agent of the ACP registry distributed so runs with this profile (``profile_for_catalog``).
    packages: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    # ACP client methods not offered to this kind of agent (a workaround: gemini fails to create a
    # file when it can read files through the client), whatever its entry adds.
    disabled_services: frozenset[str] = frozenset()
    # ACP authMethod id -> environment variables, any one of which makes the method work (old and
    # new ids of one agent side by side: the agent's `initialize` says which it has).
    auth_methods: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # ACP authMethod id -> login files (as `credential_files`), any one of which makes it work.
    auth_method_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Variables that give the agent credentials when it lists no method the bridge can use
    # (legacy `credentialsAvailable`); empty: the bridge cannot tell, so credentials count as there.
    credential_env: tuple[str, ...] = ()
    # Files that hold a login (``~`` and ``$VAR`` expanded): credentials without any variable.
    credential_files: tuple[str, ...] = ()
    # Without credentials the agent cannot work at all: the create fails naming the variables
    # (agents that ask for `authenticate` fail so anyway when they refuse `session/new`).
    requires_credentials: bool = False
    # Legacy /modes (None: learned from the agent) and the agentMode values accepted (None: any).
    legacy_modes: tuple[dict[str, str], ...] | None = None
    agent_modes: dict[str, ModeTarget] | None = None
    # Does the agent's own mode list name agent modes (opencode build/plan) rather than permission
    # modes (claude's default/acceptEdits/..., codex's read-only/auto/full-access)?
    modes_are_agent_modes: bool = True
    permission_modes: dict[str, ModeTarget] = field(
        default_factory=lambda: {m: ModeTarget() for m in ("default", "plan", "bypass", "acceptEdits")}
    )
    # Legacy model name -> the agent's model ids it may mean, best first.
    model_aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # An unknown model is a 400 (else it is passed on only in session/new's _meta).
    strict_models: bool = True
    # /models before any session: start the agent once to ask it (else the fallback answers).
    probe_models: bool = False
    # /models before any session told the real list.
    fallback_models: dict[str, Any] | None = None
    # Tool names: ACP kind -> stable name, used when the agent gives no vendor name. With
    # `title_names` the first title is the name (agents whose titles are tool names).
    tool_names: dict[str, str] = field(default_factory=dict)
    title_names: bool = True
    # The agent's own tool names (ACP's tool-call `name`, vendor names) -> stable names; names in
    # `kind_named_tools` run anything, so the ACP kind names the call (via `tool_names`).
    tool_aliases: dict[str, str] = field(default_factory=dict)
    kind_named_tools: frozenset[str] = frozenset()
    # The agent announces each tool call before asking permission for it, but the two may cross on
    # the wire: a permission for an unknown call is held (bounded) until the call is announced.
    announces_tool_calls: bool = False
    # Permission `action` by ACP kind when the request names no tool (legacy codex actions).
    permission_actions: dict[str, str] = field(default_factory=dict)
    # The legacy shape of permission.requested `metadata` (hitl_shapes.legacy_metadata): "claude",
    # "codex" or "generic".
    permission_metadata: str = "generic"
    # In permissionMode `bypass` the bridge approves what the agent still asks (False: shown and
    # waiting like any request, as legacy's mock, which asked in bypass too).
    bypass_approves: bool = True
    # Keys of `rawOutput` that hold a tool's output text, best first.
    output_fields: tuple[str, ...] = ("output",)
    # A `rawOutput` object with none of them is shown as its JSON text (else: the text content, or "").
    json_output: bool = True
    # The agent's own notifications (outside ACP's `_` extension names) that carry an ACP session
    # update: method -> its `sessionUpdate` kind (the params are the update).
    update_notifications: dict[str, str] = field(default_factory=dict)
    # Dotted paths in `rawOutput` to a unified diff the agent made itself (used for file_ref diffs).
    patch_fields: tuple[str, ...] = ()
    # Its ACP v1 diffs carry whole files (ACP's meaning); claude's carry the edited strings, trimmed,
    # so without its exact record or the file itself no diff is shown for them.
    whole_file_diffs: bool = True
    # Each turn's token usage is also a `status` item labelled `thread.token_usage.updated`, as
    # legacy showed codex's (its ThreadTokenUsageUpdated notification).
    legacy_usage_status: bool = False


_STANDARD_TOOL_NAMES = {
    "read": "read",
    "edit": "edit",
    "delete": "delete",
    "move": "move",
    "search": "search",
    "execute": "shell",
    "think": "think",
    "fetch": "fetch",
    "switch_mode": "switch_mode",
    "other": "tool",
}

CLAUDE_ENV = ("ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
CLAUDE_CLOUD_ENV = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
OPENAI_ENV = ("OPENAI_API_KEY", "CODEX_API_KEY")
PLAN_PREFIX = "Make a plan before acting.\n\n"
CODEX_LOGIN = ("$CODEX_HOME/auth.json", "~/.codex/auth.json")

PROFILES: dict[str, AgentProfile] = {
    p.id: p
    for p in (
        AgentProfile(
            id="claude",
            probe_models=True,
            commands=(("claude-agent-acp",), ("claude-code-acp",)),
            npm=NpmAdapter(
                "@agentclientprotocol/claude-agent-acp",
                "0.101.0",
                "claude-agent-acp",
                earlier=(EarlierPackage("@zed-industries/claude-agent-acp", "0.23.1"),),
            ),
            packages=("@zed-industries/claude-code-acp",),  # the adapter before claude-agent-acp
            credential_env=CLAUDE_ENV + CLAUDE_CLOUD_ENV,
            credential_files=("$CLAUDE_CONFIG_DIR/.credentials.json", "~/.claude/.credentials.json"),
            requires_credentials=True,
            legacy_modes=(
                {"id": "build", "name": "Build", "description": "Default build mode"},
                {"id": "plan", "name": "Plan", "description": "Plan mode (prompt-only)"},
            ),
            agent_modes={"build": ModeTarget(), "plan": ModeTarget(mode="plan")},
            modes_are_agent_modes=False,
            permission_modes={
                "default": ModeTarget(mode="default"),
                "acceptEdits": ModeTarget(mode="acceptEdits"),
                "plan": ModeTarget(mode="plan"),
                # Claude refuses to skip permissions as root (legacy: a 400 then).
                "bypass": ModeTarget(mode="bypassPermissions", refused_as_root=True),
            },
            model_aliases={
                "default": ("default",),
                "sonnet": ("sonnet", "sonnet[1m]"),
                "opus": ("opus", "opus[1m]"),
                "haiku": ("haiku",),
            },
            fallback_models={
                "models": [
                    {"id": "default", "name": "Default (recommended)"},
                    {"id": "sonnet", "name": "Sonnet"},
                    {"id": "opus", "name": "Opus"},
                    {"id": "haiku", "name": "Haiku"},
                ],
                "defaultModel": "default",
            },
            tool_names={**_STANDARD_TOOL_NAMES, "execute": "Bash", "read": "Read", "edit": "Edit"},
            title_names=False,  # titles are "Terminal", "Read File"; the name is in _meta.claudeCode
            announces_tool_calls=True,
            permission_metadata="claude",
            whole_file_diffs=False,
        ),
        AgentProfile(
            id="codex",
            probe_models=True,
            commands=(("codex-acp",),),
            # 2.x is a Node program over @openai/codex; 0.x was a platform binary behind a wrapper.
            npm=NpmAdapter(
                "@agentclientprotocol/codex-acp",
                "2.6.0",
                "codex-acp",
                earlier=(
                    EarlierPackage(
                        "@zed-industries/codex-acp",
                        "0.16.0",
                        native="@zed-industries/codex-acp-{platform}/bin/codex-acp",
                    ),
                ),
            ),
            # 0.x: openai-api-key / codex-api-key; 2.x: api-key and chat-gpt (a login in auth.json).
            # api-key reads `_meta["api-key"].apiKey`, else CODEX_API_KEY, then OPENAI_API_KEY: the
            # agent's own environment has the key, so it is not sent (nor written to transcripts).
            auth_methods={
                "openai-api-key": ("OPENAI_API_KEY",),
                "codex-api-key": ("CODEX_API_KEY",),
                "api-key": ("CODEX_API_KEY", "OPENAI_API_KEY"),
            },
            auth_method_files={"chat-gpt": CODEX_LOGIN, "chatgpt": CODEX_LOGIN},
            credential_env=OPENAI_ENV,
            credential_files=CODEX_LOGIN,
            legacy_modes=(
                {"id": "build", "name": "Build", "description": "Default build mode"},
                {"id": "plan", "name": "Plan", "description": "Planning mode via prompt prefix"},
            ),
            agent_modes={"build": ModeTarget(), "plan": ModeTarget(prompt_prefix=PLAN_PREFIX)},
            modes_are_agent_modes=False,
            # Legacy: bypass = approval never + full access; plan = untrusted + read-only; default and
            # acceptEdits left codex on its own configuration. Modes: 0.x read-only, auto,
            # full-access; 2.x read-only, workspace-write, agent (its default), agent-full-access.
            permission_modes={
                "default": ModeTarget(),
                "acceptEdits": ModeTarget(),
                "plan": ModeTarget(mode="read-only", prompt_prefix=PLAN_PREFIX),
                "bypass": ModeTarget(mode="agent-full-access", alternatives=("full-access",)),
            },
            fallback_models={"models": []},
            tool_names={**_STANDARD_TOOL_NAMES, "execute": "shell", "edit": "edit", "read": "read"},
            title_names=False,  # titles are per call: "Edit /abs/path", the command line
            # 2.x names its calls (ACP `name`): `exec_command` runs `cat` (kind read) as well as `echo`.
            tool_aliases={"exec_command": "shell", "shell": "shell", "apply_patch": "edit"},
            kind_named_tools=frozenset({"exec_command", "shell"}),
            output_fields=("formatted_output", "aggregated_output", "stdout", "output"),
            permission_actions={"edit": "fileChange", "delete": "fileChange", "move": "fileChange"}
            | {kind: "commandExecution" for kind in ("execute", "read", "search", "fetch", "other")},
            permission_metadata="codex",
            legacy_usage_status=True,
        ),
        AgentProfile(
            id="opencode",
            probe_models=True,
            commands=(("opencode", "acp"),),
            npm=NpmAdapter("opencode-ai", "1.18.33", "opencode", args=("acp",), run_scripts=True),
            credential_env=CLAUDE_ENV + OPENAI_ENV,
            credential_files=("$XDG_DATA_HOME/opencode/auth.json", "~/.local/share/opencode/auth.json"),
            legacy_modes=(
                {"id": "build", "name": "Build", "description": "Default build mode"},
                {"id": "plan", "name": "Plan", "description": "Planning mode"},
                {"id": "custom", "name": "Custom", "description": "Any user-defined OpenCode agent name"},
            ),
            agent_modes=None,  # any OpenCode agent name
            permission_modes={"default": ModeTarget()},
            fallback_models={"models": []},
            tool_names=dict(_STANDARD_TOOL_NAMES, execute="bash", edit="edit"),
            patch_fields=("metadata.diff",),
        ),
        AgentProfile(
            id="amp",
            commands=(("amp-acp",),),
            credential_env=CLAUDE_ENV,
            legacy_modes=({"id": "build", "name": "Build", "description": "Default build mode"},),
            agent_modes={"build": ModeTarget()},
            permission_modes={"default": ModeTarget(), "bypass": ModeTarget()},
            fallback_models={"models": [{"id": "amp-default", "name": "Amp Default"}], "defaultModel": "amp-default"},
        ),
        AgentProfile(
            id="mock",
            legacy_modes=(
                {"id": "build", "name": "Build", "description": "Mock agent for UI testing"},
                {"id": "plan", "name": "Plan", "description": "Plan-only mock mode"},
            ),
            agent_modes={"build": ModeTarget(mode="build"), "plan": ModeTarget(mode="plan")},
            permission_modes={m: ModeTarget() for m in ("default", "plan", "bypass")},
            strict_models=False,  # the legacy mock took any model name
            bypass_approves=False,
            fallback_models={"models": [{"id": "mock", "name": "Mock"}], "defaultModel": "mock"},
        ),
        AgentProfile(
            id="gemini",
            probe_models=True,
            commands=(("gemini", "--acp"),),
            npm=NpmAdapter("@google/gemini-cli", "0.61.0", "gemini", args=("--acp",)),
            # gemini reads a file through the client before writing it and takes "not found" for a
            # failure, so it could never create one: it reads files itself.
            disabled_services=frozenset({"fs/read_text_file"}),
            credential_env=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
            permission_modes={
                "default": ModeTarget(mode="default"),
                "acceptEdits": ModeTarget(mode="autoEdit"),
                "plan": ModeTarget(mode="plan"),
                "bypass": ModeTarget(mode="yolo"),
            },
            modes_are_agent_modes=False,
            # Titles are per call ("echo fake-shell-ok", "Set 2 todo(s)"): the kind names the tool.
            tool_names=dict(_STANDARD_TOOL_NAMES),
            title_names=False,
        ),
        AgentProfile(
            id="qwen",
            # Not installed by the bridge (no legacy id): the ACP registry's qwen-code, or an agents file's.
            commands=(("qwen", "--acp"),),
            packages=("@qwen-code/qwen-code",),
            auth_methods={"openai": ("OPENAI_API_KEY",)},
            credential_env=("OPENAI_API_KEY",),
            credential_files=("~/.qwen/oauth_creds.json",),
            # Its own default is "auto" (a classifier approves what it judges safe): legacy `default` asks.
            permission_modes={
                "default": ModeTarget(mode="default"),
                "acceptEdits": ModeTarget(mode="auto-edit"),
                "plan": ModeTarget(mode="plan"),
                "bypass": ModeTarget(mode="yolo"),
            },
            modes_are_agent_modes=False,
            tool_names=dict(_STANDARD_TOOL_NAMES),  # titles' first words name the tools: WriteFile, Edit, Shell
            output_fields=("output",),
            json_output=False,  # a write's rawOutput is the whole file (in the diff already), not its output
            update_notifications={"qwen/notify/session/mode-update": "current_mode_update"},
        ),
        # Any other ACP agent: its own modes are agent modes, its titles name its tools.
        AgentProfile(id="generic"),
    )
}

GENERIC = PROFILES["generic"]


def profile_for(name: str | None) -> AgentProfile:
    return PROFILES.get(name or "generic", GENERIC)


def profile_for_catalog(packages: tuple[str, ...], programs: tuple[str, ...]) -> AgentProfile:
    """The profile of an ACP registry agent distributed as these packages or programs: the one that
    names one of its packages, else one of its programs; else the generic one."""
    for profile in PROFILES.values():
        names = {*profile.packages, *(profile.npm.packages if profile.npm is not None else ())}
        if names.intersection(packages):
            return profile
    for profile in PROFILES.values():
        names = {*profile.programs, *(command[0] for command in profile.commands)}
        if names.intersection(programs):
            return profile
    return GENERIC


LEGACY_IDS = ("claude", "codex", "opencode", "amp", "mock")
