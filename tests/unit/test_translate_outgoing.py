"""Legacy create/message fields -> session/new params, session/prompt _meta, ACP mcpServers."""

from __future__ import annotations

from app.translate.outgoing import mcp_servers, prompt_params, session_new_params

SKILLS = {"sources": [{"type": "local", "source": "/skills", "skills": ["lint"], "ref": None, "subpath": "s"}]}


def test_session_new_params_carry_every_create_field() -> None:
    params = session_new_params(
        cwd="/w",
        session_id="s1",
        agent="claude",
        agent_mode="plan",
        permission_mode="acceptEdits",
        model="opus",
        variant="high",
        agent_version="2.1.0",
        title="Fix the bug",
        skills=SKILLS,
        mcp=None,
    )
    assert params == {
        "cwd": "/w",
        "mcpServers": [],
        "_meta": {
            "sandbox-agent/sessionId": "s1",
            "sandbox-agent/agent": "claude",
            "sandbox-agent/agentMode": "plan",
            "sandbox-agent/permissionMode": "acceptEdits",
            "sandbox-agent/model": "opus",
            "sandbox-agent/variant": "high",
            "sandbox-agent/agentVersion": "2.1.0",
            "sandbox-agent/title": "Fix the bug",
            "sandbox-agent/skills": SKILLS,
        },
    }


def test_absent_fields_are_not_sent() -> None:
    params = session_new_params(
        cwd="/w",
        session_id="s1",
        agent="mock",
        agent_mode=None,
        permission_mode=None,
        model=None,
        variant=None,
        agent_version=None,
        title=None,
        skills=None,
        mcp=None,
    )
    assert params["_meta"] == {"sandbox-agent/sessionId": "s1", "sandbox-agent/agent": "mock"}


def test_prompt_params_carry_the_turn_id() -> None:
    blocks = [{"type": "text", "text": "hi"}]
    assert prompt_params("n1", blocks, "turn_3") == {
        "sessionId": "n1",
        "prompt": blocks,
        "_meta": {"sandbox-agent/turnId": "turn_3"},
    }


def test_mcp_servers_with_extension_fields_in_meta() -> None:
    mcp = {
        "local": {
            "type": "local",
            "command": ["node", "server.js"],
            "args": ["--port", "0"],
            "env": {"TOKEN": "t", "N": 1},
            "cwd": "/srv",
            "timeoutMs": 1000,
            "enabled": True,
        },
        "plain": {"type": "local", "command": "mcp-plain"},
        "remote": {
            "type": "remote",
            "url": "https://mcp.example/api",
            "headers": {"X-A": "1"},
            "bearerTokenEnvVar": "MCP_TOKEN",
            "envHeaders": {"X-B": "B_ENV"},
            "oauth": {"clientId": "id", "clientSecret": "secret", "scope": "read"},
            "timeoutMs": 2000,
        },
        "events": {"type": "remote", "url": "https://mcp.example/sse", "transport": "sse", "oauth": False},
        "off": {"type": "local", "command": "never", "enabled": False},
    }
    assert mcp_servers(mcp) == [
        {
            "name": "local",
            "command": "node",
            "args": ["server.js", "--port", "0"],
            "env": [{"name": "TOKEN", "value": "t"}, {"name": "N", "value": "1"}],
            "_meta": {"sandbox-agent/cwd": "/srv", "sandbox-agent/timeoutMs": 1000, "sandbox-agent/enabled": True},
        },
        {"name": "plain", "command": "mcp-plain", "args": [], "env": []},
        {
            "type": "http",
            "name": "remote",
            "url": "https://mcp.example/api",
            "headers": [{"name": "X-A", "value": "1"}],
            "_meta": {
                "sandbox-agent/timeoutMs": 2000,
                "sandbox-agent/bearerTokenEnvVar": "MCP_TOKEN",
                "sandbox-agent/envHeaders": {"X-B": "B_ENV"},
                "sandbox-agent/oauth": {"clientId": "id", "clientSecret": "secret", "scope": "read"},
            },
        },
        {
            "type": "sse",
            "name": "events",
            "url": "https://mcp.example/sse",
            "headers": [],
            "_meta": {"sandbox-agent/oauthDisabled": True},
        },
    ]
