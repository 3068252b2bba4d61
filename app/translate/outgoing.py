"""Legacy request fields -> what the bridge sends the agent: ``session/new`` params,
``session/prompt`` ``_meta``, ACP ``mcpServers``.

ACP has fields for the working directory (``cwd``) and MCP servers; every other legacy create
field travels as ``_meta["sandbox-agent/<field>"]`` so that agents that know the legacy model can
use it. Keys whose value is None are not sent. Agents need none of them.
"""

from __future__ import annotations

from typing import Any

from .content import META_PREFIX


def meta(**values: Any) -> dict[str, Any]:
    """``{"sandbox-agent/<name>": value}`` for every value that is not None."""
    return {META_PREFIX + name: value for name, value in values.items() if value is not None}


def session_new_params(
    *,
    cwd: str,
    session_id: str,
    agent: str,
    agent_mode: str | None,
    permission_mode: str | None,
    model: str | None,
    variant: str | None,
    agent_version: str | None,
    title: str | None,
    skills: dict[str, Any] | None,
    mcp: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "cwd": cwd,
        "mcpServers": mcp_servers(mcp),
        "_meta": meta(
            sessionId=session_id,
            agent=agent,
            agentMode=agent_mode,
            permissionMode=permission_mode,
            model=model,
            variant=variant,
            agentVersion=agent_version,
            title=title,
            skills=skills,
            mcp=mcp,
        ),
    }


def prompt_params(native_session_id: str | None, blocks: list[dict[str, Any]], turn_id: str) -> dict[str, Any]:
    return {"sessionId": native_session_id, "prompt": blocks, "_meta": meta(turnId=turn_id)}


# Legacy MCP config fields with no ACP field: they ride in the server's _meta.
_STDIO_EXTRAS = ("cwd", "timeoutMs")
_REMOTE_EXTRAS = ("timeoutMs", "bearerTokenEnvVar", "envHeaders")


def mcp_servers(mcp: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Legacy ``mcp`` map -> ACP ``mcpServers`` (stdio without ``type``; http/sse with ``type``).

    Disabled servers are not sent: ACP has no way to pass a server the agent must not start.
    """
    servers: list[dict[str, Any]] = []
    for name, config in (mcp or {}).items():
        if not isinstance(config, dict) or config.get("enabled") is False:
            continue
        if config.get("type") in ("local", "stdio"):
            command = config.get("command")
            args = list(config.get("args") or [])
            if isinstance(command, list):
                command, args = (command[0] if command else ""), [*command[1:], *args]
            env = config.get("env") or {}
            server: dict[str, Any] = {
                "name": name,
                "command": command,
                "args": args,
                "env": [{"name": k, "value": str(v)} for k, v in env.items()],
            }
            extras = meta(**{key: config.get(key) for key in _STDIO_EXTRAS})
        else:
            headers = config.get("headers") or {}
            server = {
                "type": "sse" if config.get("transport") == "sse" else "http",
                "name": name,
                "url": config.get("url"),
                "headers": [{"name": k, "value": str(v)} for k, v in headers.items()],
            }
            extras = meta(**{key: config.get(key) for key in _REMOTE_EXTRAS})
            oauth = config.get("oauth")
            if oauth is False:
                extras[META_PREFIX + "oauthDisabled"] = True
            elif isinstance(oauth, dict):
                extras[META_PREFIX + "oauth"] = oauth
        if config.get("enabled") is True:
            extras[META_PREFIX + "enabled"] = True
        if extras:
            server["_meta"] = extras
        servers.append(server)
    return servers
