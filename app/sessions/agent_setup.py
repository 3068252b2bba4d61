"""Configuring a started agent the way the create request asked, through its profile.

- **Auth** (after ``initialize``): when the agent lists ``authMethods`` and the environment has what
  one needs (per the profile), send ACP ``authenticate`` with it. When the profile says the agent
  needs it and nothing fits, or the agent refuses ``session/new`` with -32000 (authenticate first),
  the create fails naming the variables that would work.
- **Model**: ``model`` may be one of the agent's model ids, a legacy name (the profile's aliases:
  ``opus`` -> ``opus[1m]``) or a full vendor id (``claude-opus-4-6`` -> the option of that family);
  it is set through the ``model`` config option, or ``session/set_model`` for an agent that reports
  ``models`` instead (gemini). An unknown model is a 400 naming the valid ids.
- **Modes**: the profile maps ``agentMode`` and ``permissionMode`` to one of the agent's own modes
  (candidates, best first: the first the agent offers is set with ``session/set_mode`` or the
  ``mode`` config option, whichever it offers) and/or a prompt prefix. A mode the agent does not
  offer is a 400 mode_not_supported.
- **Variant**: the ``thought_level`` config option.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.acp.sdk import RequestError
from app.agents.profiles import AgentProfile, ModeTarget
from app.agents.registry import AgentSpec, find_option, models_of, option_values
from app.errors import BridgeError, InvalidRequest, ModeNotSupported
from app.translate.session_translator import (
    MOCK_USER_ITEM,
    SessionState,
    SessionTranslator,
    UserItemStyle,
    apply_config_options,
)
from app.translate.tools import ToolStyle

AUTH_REQUIRED = -32000
METHOD_NOT_FOUND = -32601


class CredentialsMissing(BridgeError):
    """The agent needs credentials the server's environment does not have."""

    def __init__(self, agent: str, variables: list[str], methods: list[str]) -> None:
        wanted = " or ".join(variables) if variables else "the agent's login"
        super().__init__(
            f"invalid request: agent {agent} has no credentials: set {wanted} in the server's environment",
            agent=agent,
            details={"variables": variables, "authMethods": methods},
        )


@dataclass(slots=True)
class AgentSetup:
    """What the configured session runs with."""

    prompt_prefix: str = ""
    model: str | None = None
    mode: str | None = None
    auth_method: str | None = None


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _targets(spec: AgentSpec, agent_mode: str, permission_mode: str) -> tuple[ModeTarget, ModeTarget]:
    profile = spec.profile
    agent = (profile.agent_modes or {}).get(agent_mode, ModeTarget())
    permission = profile.permission_modes.get(permission_mode, ModeTarget())
    return agent, permission


def check_request(spec: AgentSpec, agent_mode: str, permission_mode: str, model: str | None) -> None:
    """What can be refused before the agent is started (legacy order: after the mode checks)."""
    _, permission = _targets(spec, agent_mode, permission_mode)
    if permission.refused_as_root and running_as_root():
        raise InvalidRequest(
            f"permission mode '{permission_mode}' is not supported when running as root "
            f"({spec.id} refuses to skip permissions with root privileges)"
        )
    if model is not None and spec.models:
        resolve_model(spec, model, [m["id"] for m in spec.models.get("models", [])])
    if spec.profile.requires_credentials and not spec.credentials_available():
        raise credentials_error(spec, spec.auth_methods)


# ---- auth ------------------------------------------------------------------------------------------
def _method_ids(methods: Any) -> list[str]:
    return [str(m.get("id")) for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []


async def authenticate(connection: Any, spec: AgentSpec, initialize_result: dict[str, Any]) -> str | None:
    """Send ``authenticate`` for a method the environment satisfies; the method id, or None."""
    methods = initialize_result.get("authMethods")
    method = spec.usable_auth_method(methods)
    if method is not None:
        await connection.request("authenticate", {"methodId": method})
        return method
    if spec.profile.requires_credentials and not spec.credentials_available():
        raise credentials_error(spec, methods)
    return None


def credentials_error(spec: AgentSpec, methods: Any) -> CredentialsMissing:
    return CredentialsMissing(spec.id, spec.credential_variables(), _method_ids(methods))


def is_auth_refusal(code: Any) -> bool:
    return bool(code == AUTH_REQUIRED)


# ---- models ----------------------------------------------------------------------------------------
_FAMILY = re.compile(r"[a-z]+")


def _base(value: str) -> str:
    """``opus[1m]`` -> ``opus``; ``openai/gpt-5`` -> ``gpt-5``."""
    return value.split("[", 1)[0].rsplit("/", 1)[-1].lower()


def resolve_model(spec: AgentSpec, wanted: str, values: list[str], names: dict[str, str] | None = None) -> str:
    """The agent's model id for ``wanted``; InvalidRequest naming the valid ids when none fits."""
    if not values or wanted in values:
        return wanted
    for alias in spec.profile.model_aliases.get(wanted, ()):
        if alias in values:
            return alias
    lowered = wanted.lower()
    for value in values:  # a bare name for a decorated id: opus -> opus[1m], gpt-5 -> openai/gpt-5
        if _base(value) == lowered or value.lower() == lowered:
            return value
    for value, name in (names or {}).items():
        if name.lower() == lowered:
            return value
    # A full vendor id names its family: claude-opus-4-6 -> the opus option.
    words = set(_FAMILY.findall(lowered))
    families = [v for v in values if _base(v) in words]
    if len(families) == 1:
        return families[0]
    if not spec.profile.strict_models:
        return wanted  # passed on as asked (session/new _meta), nothing set
    raise InvalidRequest(
        f"unknown model for {spec.id}: {wanted} (valid: {', '.join(values)})",
        agent=spec.id,
        details={"model": wanted, "validModels": values},
    )


# ---- applying ---------------------------------------------------------------------------------------
class _Options:
    """The agent's config options, kept current from each set_config_option answer."""

    def __init__(self, result: dict[str, Any]) -> None:
        options = result.get("configOptions")
        self.options: list[Any] = options if isinstance(options, list) else []

    def get(self, category: str) -> dict[str, Any] | None:
        return find_option(self.options, category)

    async def set(self, connection: Any, session_id: str, option: dict[str, Any], value: str) -> None:
        if option.get("currentValue") == value:
            return
        answer = await connection.request(
            "session/set_config_option", {"sessionId": session_id, "configId": option.get("id"), "value": value}
        )
        if isinstance(answer, dict) and isinstance(answer.get("configOptions"), list):
            self.options = answer["configOptions"]
        else:
            option["currentValue"] = value


async def configure(
    connection: Any,
    spec: AgentSpec,
    config: Any,
    native_session_id: str,
    new_session: dict[str, Any],
) -> AgentSetup:
    """Apply model, modes and variant of ``config`` (a SessionConfig) to the new session."""
    setup = AgentSetup()
    options = _Options(new_session)
    sid = native_session_id

    # Model.
    model_option = options.get("model")
    if config.model is not None and model_option is not None:
        choices = option_values(model_option)
        values = [str(o["value"]) for o in choices]
        names = {str(o["value"]): str(o.get("name", "")) for o in choices}
        resolved = resolve_model(spec, config.model, values, names)
        if resolved in values:
            await options.set(connection, sid, model_option, resolved)
    elif config.model is not None and isinstance(new_session.get("models"), dict):
        setup.model = await _set_model(connection, spec, sid, new_session["models"], config.model)

    # Modes: the agent mode's target wins over the permission mode's.
    agent_target, permission_target = _targets(spec, config.agent_mode, config.permission_mode)
    wanted = agent_target.candidates or permission_target.candidates
    if spec.profile.agent_modes is None and not agent_target.candidates and config.agent_mode:
        # opencode: the agent mode is the agent's own mode name. Where the agent's modes are permission
        # modes (gemini), the default agent mode `build` leaves the permission mode's choice alone.
        if spec.profile.modes_are_agent_modes or config.agent_mode != "build" or not permission_target.candidates:
            wanted = (config.agent_mode,)
    setup.prompt_prefix = agent_target.prompt_prefix or permission_target.prompt_prefix or ""
    if wanted:
        setup.mode = await _set_mode(connection, spec, sid, new_session, options, wanted, config)

    # Variant.
    variant_option = options.get("thought_level")
    if config.variant is not None and variant_option is not None:
        values = [str(o["value"]) for o in option_values(variant_option)]
        if config.variant not in values:
            raise InvalidRequest(
                f"unknown variant for {spec.id}: {config.variant} (valid: {', '.join(values)})",
                agent=spec.id,
                details={"variant": config.variant, "validVariants": values},
            )
        await options.set(connection, sid, variant_option, config.variant)

    model_now = options.get("model")
    if model_now is not None and isinstance(model_now.get("currentValue"), str):
        setup.model = model_now["currentValue"]
    new_session["configOptions"] = options.options  # what the session now runs with
    return setup


async def _set_model(connection: Any, spec: AgentSpec, sid: str, models: dict[str, Any], wanted: str) -> str | None:
    """An agent that reports ``models`` (not a model config option) takes its model through
    ``session/set_model`` (gemini); the model it then runs with, as far as known."""
    current = models.get("currentModelId")
    if wanted == current:  # what it runs already (a default the agent does not list, gemini's --model)
        return wanted
    listed = models_of({"models": models}) or {"models": []}
    values = [m["id"] for m in listed["models"]]
    resolved = resolve_model(spec, wanted, values)
    if resolved == current or (values and resolved not in values):
        return current if isinstance(current, str) else None
    try:
        await connection.request("session/set_model", {"sessionId": sid, "modelId": resolved})
    except RequestError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return current if isinstance(current, str) else None  # it keeps its own: SessionInfo says which
    models["currentModelId"] = resolved
    return resolved


async def _set_mode(
    connection: Any,
    spec: AgentSpec,
    sid: str,
    new_session: dict[str, Any],
    options: _Options,
    candidates: tuple[str, ...],
    config: Any,
) -> str | None:
    """Set the first of ``candidates`` the agent offers; mode_not_supported when it offers none."""
    option = options.get("mode")
    if option is not None:
        values = [str(o["value"]) for o in option_values(option)]
        wanted = next((c for c in candidates if c in values), None)
        if wanted is None:
            if _is_default_build(spec, config, candidates[0]):
                return None
            raise _mode_error(spec, config, candidates[0])
        await options.set(connection, sid, option, wanted)
        return wanted
    modes = new_session.get("modes")
    if isinstance(modes, dict):
        available = {m.get("id") for m in modes.get("availableModes") or [] if isinstance(m, dict)}
        wanted = next((c for c in candidates if c in available), None)
        if wanted is None:
            if _is_default_build(spec, config, candidates[0]):
                return None
            raise _mode_error(spec, config, candidates[0])
        if wanted != modes.get("currentModeId"):
            await connection.request("session/set_mode", {"sessionId": sid, "modeId": wanted})
        return wanted
    # The agent offers no modes: an agent mode it would have to name cannot be honoured.
    first = candidates[0]
    if spec.profile.agent_modes is None and first == config.agent_mode and first != "build":
        raise _mode_error(spec, config, first)
    return None


def _is_default_build(spec: AgentSpec, config: Any, wanted: str) -> bool:
    """``build`` (the default agent mode) on an agent whose modes have no such name: its default."""
    return spec.profile.agent_modes is None and wanted == "build" == config.agent_mode


def _mode_error(spec: AgentSpec, config: Any, wanted: str) -> ModeNotSupported:
    asked = config.agent_mode if wanted == config.agent_mode else config.permission_mode
    return ModeNotSupported(spec.id, asked)


# ---- the session's side ----------------------------------------------------------------------------
def attach(state: SessionState, config: Any, spec: AgentSpec, setup: AgentSetup, result: dict[str, Any]) -> None:
    """Show what the agent now runs with in the session's state (SessionInfo) and config."""
    state.modes_are_agent_modes = spec.profile.modes_are_agent_modes
    if not state.modes_are_agent_modes:
        state.agent_mode = None  # a permission mode the agent reported while it was being set
    modes = result.get("modes")
    if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
        state.mode = modes["currentModeId"]
    options = result.get("configOptions")
    if isinstance(options, list):
        state.config_options = options
        apply_config_options(state, options)
    if setup.mode is not None:
        state.mode = setup.mode
    if setup.model is not None:
        config.model = state.model = setup.model


def refresh_models(spec: AgentSpec, message: dict[str, Any]) -> None:
    """An agent that reports new config options refreshes the agent's model list (not its default)."""
    params = message.get("params")
    update = params.get("update") if type(params) is dict else None
    if type(update) is dict and update.get("sessionUpdate") == "config_option_update":
        spec.learn_options(update, refresh=True)


def for_agent(setup: AgentSetup | None, message: str) -> str:
    """The prompt text the agent gets: the mode's prefix (codex plan), then the message."""
    return setup.prompt_prefix + message if setup is not None and setup.prompt_prefix else message


def translator(spec: AgentSpec, terminal_output: Callable[[str], str | None]) -> SessionTranslator:
    """A session's translator as its agent's profile wants it: how its tools are named and read,
    its user items, its turns' usage as status items (legacy codex)."""
    return SessionTranslator(
        terminal_output=terminal_output,
        user_item=MOCK_USER_ITEM if spec.is_mock else UserItemStyle(),
        tool_style=tool_style(spec),
        usage_status=spec.profile.legacy_usage_status,
    )


def tool_style(spec: AgentSpec) -> ToolStyle:
    """How the translator names this agent's tools and reads their output (from its profile)."""
    return profile_tool_style(spec.profile)


def profile_tool_style(profile: AgentProfile) -> ToolStyle:
    """The ``ToolStyle`` of a profile (also how the golden tests read a legacy agent's recording)."""
    return ToolStyle(
        dict(profile.tool_names),
        profile.title_names,
        profile.output_fields,
        profile.patch_fields,
        dict(profile.tool_aliases),
        profile.kind_named_tools,
        profile.whole_file_diffs,
        profile.json_output,
    )
