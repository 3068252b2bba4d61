"""Agent profiles as data, and how the bridge applies them: credentials, models, modes, variant, tool
names and output. The real agents themselves run in tests/e2e/test_legacy_agents.py."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from app.agents.install import ADAPTERS
from app.agents.node import node_satisfies
from app.agents.profiles import LEGACY_IDS, PROFILES
from app.agents.registry import AgentRegistry, AgentsFileError, AgentSpec, load_agents_file
from app.errors import InvalidRequest, ModeNotSupported
from app.sessions import agent_setup
from app.sessions.agent_setup import AgentSetup, CredentialsMissing, configure, resolve_model
from app.sessions.config import SessionConfig
from app.translate.extensions import rpc_error_data
from app.translate.session_translator import SessionTranslator
from app.translate.tools import ToolStyle

CLAUDE_MODELS = ["default", "sonnet[1m]", "opus[1m]", "haiku"]


def spec(agent: str, **kw: Any) -> AgentSpec:
    return AgentSpec(agent, ["x"], legacy=agent in LEGACY_IDS, profile=PROFILES[agent], **kw)


def config(**kw: Any) -> SessionConfig:
    base: dict[str, Any] = {"agent": "x", "agent_mode": "build", "permission_mode": "default", "model": None}
    base["variant"] = None
    return SessionConfig(**{**base, **kw})


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        return {}


def option(option_id: str, category: str, values: list[str], current: str) -> dict[str, Any]:
    return {
        "id": option_id,
        "name": option_id,
        "category": category,
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": v.upper()} for v in values],
    }


def run_configure(agent: str, cfg: SessionConfig, new_session: dict[str, Any]) -> tuple[AgentSetup, FakeConnection]:
    connection = FakeConnection()
    setup = asyncio.run(configure(connection, spec(agent), cfg, "native-1", new_session))
    return setup, connection


def test_every_legacy_id_has_a_profile_and_the_installable_ones_an_npm_package() -> None:
    assert set(LEGACY_IDS) <= set(PROFILES)
    assert set(ADAPTERS) == {"claude", "codex", "opencode"}
    assert ADAPTERS["opencode"].run_scripts
    # Today's names; versions from before the move come from the old scope (codex 0.x as a binary).
    codex, claude = ADAPTERS["codex"], ADAPTERS["claude"]
    assert codex.spec(codex.version) == "@agentclientprotocol/codex-acp@2.6.0"
    assert codex.spec("0.16.0") == "@zed-industries/codex-acp@0.16.0" and codex.natives
    assert codex.spec("latest") == "@agentclientprotocol/codex-acp@latest"
    assert claude.spec(claude.version) == "@agentclientprotocol/claude-agent-acp@0.101.0"
    assert claude.spec("0.23.1") == "@zed-industries/claude-agent-acp@0.23.1"
    assert claude.spec("0.24.0") == "@agentclientprotocol/claude-agent-acp@0.24.0"


def test_agents_file_entries_take_a_profile(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[agents.mycodex]\ncommand = ["codex-acp"]\nprofile = "codex"\n')
    (entry,) = load_agents_file(path)
    assert entry.profile is PROFILES["codex"]
    path.write_text('[agents.bad]\ncommand = ["x"]\nprofile = "nope"\n')
    with pytest.raises(AgentsFileError, match="profile must be one of"):
        load_agents_file(path)


def test_credentials_follow_the_auth_methods_the_environment_satisfies(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    codex = spec("codex")
    methods = [{"id": "chatgpt"}, {"id": "codex-api-key"}, {"id": "openai-api-key"}]
    assert not codex.credentials_available()
    assert codex.usable_auth_method(methods) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert codex.credentials_available()
    assert codex.usable_auth_method(methods) == "openai-api-key"
    codex.auth_methods = [{"id": "chatgpt"}]  # an agent offering no method the key satisfies
    assert not codex.credentials_available()
    assert spec("mock").credentials_available()


def test_authenticate_sends_the_method_or_names_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/nonexistent")
    for var in ("OPENAI_API_KEY", "CODEX_API_KEY", "ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CODEX_API_KEY", "k")
    connection = FakeConnection()
    init = {"authMethods": [{"id": "openai-api-key"}, {"id": "codex-api-key"}]}
    assert asyncio.run(agent_setup.authenticate(connection, spec("codex"), init)) == "codex-api-key"
    assert connection.sent == [("authenticate", {"methodId": "codex-api-key"})]
    for var in ("CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(CredentialsMissing) as caught:
        asyncio.run(agent_setup.authenticate(FakeConnection(), spec("claude"), {"authMethods": []}))
    problem = caught.value.problem()
    assert problem["status"] == 400 and "ANTHROPIC_API_KEY" in problem["detail"]
    assert "ANTHROPIC_API_KEY" in problem["details"]["variables"]


def test_model_names_resolve_to_the_agents_ids() -> None:
    claude = spec("claude")
    assert resolve_model(claude, "opus", CLAUDE_MODELS) == "opus[1m]"
    assert resolve_model(claude, "claude-opus-4-6", CLAUDE_MODELS) == "opus[1m]"
    assert resolve_model(claude, "claude-sonnet-4-5-20250929", CLAUDE_MODELS) == "sonnet[1m]"
    assert resolve_model(claude, "haiku", CLAUDE_MODELS) == "haiku"
    assert resolve_model(spec("opencode"), "fake-large", ["fake/fake-model", "fake/fake-large"]) == "fake/fake-large"
    with pytest.raises(InvalidRequest) as caught:
        resolve_model(claude, "gpt-4o", CLAUDE_MODELS)
    assert caught.value.problem()["details"]["validModels"] == CLAUDE_MODELS
    assert resolve_model(spec("mock"), "anything", ["mock"]) == "anything"  # the legacy mock took any name


def test_codex_bypass_plan_and_variant_reach_the_agent() -> None:
    new_session = {
        "modes": {
            "currentModeId": "read-only",
            "availableModes": [{"id": m} for m in ("read-only", "auto", "full-access")],
        },
        "configOptions": [
            option("model", "model", ["gpt-5.4", "gpt-5.4-mini"], "gpt-5.4"),
            option("reasoning_effort", "thought_level", ["low", "medium", "high"], "medium"),
        ],
    }
    setup, conn = run_configure(
        "codex", config(permission_mode="bypass", variant="high", model="gpt-5.4-mini"), new_session
    )
    sent = [(m, p.get("configId") or p.get("modeId"), p.get("value")) for m, p in conn.sent]
    assert ("session/set_config_option", "model", "gpt-5.4-mini") in sent
    assert ("session/set_mode", "full-access", None) in sent
    assert ("session/set_config_option", "reasoning_effort", "high") in sent
    assert setup.model == "gpt-5.4-mini" and setup.prompt_prefix == ""
    setup, conn = run_configure("codex", config(permission_mode="plan"), new_session)
    assert conn.sent == []  # codex already runs read-only
    assert setup.prompt_prefix.startswith("Make a plan before acting.")
    with pytest.raises(InvalidRequest, match="unknown variant"):
        run_configure("codex", config(variant="ultra"), new_session)


def test_opencode_agent_mode_goes_through_its_mode_option() -> None:
    new_session = {"configOptions": [option("mode", "mode", ["build", "plan"], "build")]}
    setup, conn = run_configure("opencode", config(agent_mode="plan"), new_session)
    assert conn.sent == [("session/set_config_option", {"sessionId": "native-1", "configId": "mode", "value": "plan"})]
    assert setup.mode == "plan"
    with pytest.raises(ModeNotSupported):
        run_configure("opencode", config(agent_mode="nope"), new_session)


def test_claude_permission_modes_are_claudes_own_and_bypass_is_refused_as_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modes = ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]
    new_session = {"modes": {"currentModeId": "default", "availableModes": [{"id": m} for m in modes]}}
    _, conn = run_configure("claude", config(permission_mode="acceptEdits"), new_session)
    assert conn.sent == [("session/set_mode", {"sessionId": "native-1", "modeId": "acceptEdits"})]
    monkeypatch.setattr(agent_setup, "running_as_root", lambda: True)
    with pytest.raises(InvalidRequest, match="not supported when running as root"):
        agent_setup.check_request(spec("claude"), "build", "bypass", None)
    agent_setup.check_request(spec("codex"), "build", "bypass", None)


def test_models_and_modes_listed_from_the_agent() -> None:
    registry = AgentRegistry()
    opencode = registry.get("opencode")
    assert opencode.models_response() == {"models": []}  # before any session
    opencode.learn(
        {"authMethods": []},
        {
            "configOptions": [
                option("model", "model", ["a/x", "a/y"], "a/x"),
                option("mode", "mode", ["build", "plan"], "build"),
            ]
        },
    )
    assert opencode.models_response() == {
        "models": [{"id": "a/x", "name": "A/X"}, {"id": "a/y", "name": "A/Y"}],
        "defaultModel": "a/x",
    }
    assert [m["id"] for m in opencode.modes_response()] == ["build", "plan", "custom"]
    opencode.learn_options({"configOptions": [option("model", "model", ["a/x", "a/z"], "a/z")]}, refresh=True)
    assert opencode.models_response()["defaultModel"] == "a/x"  # a session's choice is not the default
    claude = registry.get("claude")
    assert claude.models_response()["defaultModel"] == "default"  # legacy fallback
    claude.learn({}, {"modes": {"currentModeId": "default", "availableModes": [{"id": "acceptEdits"}]}})
    assert [m["id"] for m in claude.modes_response()] == ["build", "plan"]  # claude's modes are permission modes


def translate(style: ToolStyle, updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    t = SessionTranslator(tool_style=style)
    out = []
    for update in updates:
        out += t.session_update({"sessionId": "s", "update": update}, None)
    return [d.data["item"] for d in out if d.type == "item.completed"]


def test_tool_names_come_from_the_vendor_or_the_kind_never_a_per_call_title() -> None:
    codex = agent_setup.tool_style(spec("codex"))
    done = translate(
        codex,
        [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "echo hi",
                "kind": "execute",
                "status": "in_progress",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "completed",
                "rawOutput": {"formatted_output": "hi\n", "exit_code": 0, "stdout": "hi\n"},
            },
        ],
    )
    assert done[0]["content"][0]["name"] == "shell"
    assert done[1]["content"][0]["output"] == "hi\n"
    claude = agent_setup.tool_style(spec("claude"))
    meta = {"claudeCode": {"toolName": "Bash"}}
    done = translate(
        claude,
        [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c2",
                "title": "Terminal",
                "kind": "execute",
                "status": "completed",
                "_meta": meta,
            }
        ],
    )
    assert done[0]["content"][0]["name"] == "Bash"


def test_a_permissions_whole_file_diff_wins_over_a_later_partial_one() -> None:
    t = SessionTranslator(tool_style=agent_setup.tool_style(spec("opencode")))
    whole = {"type": "diff", "path": "/w/a.txt", "oldText": "one\ntwo\n", "newText": "one\nTWO\n"}
    t.tools.permission_tool_call({"toolCallId": "e1", "kind": "edit", "content": [whole]})
    out = t.session_update(
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "edit", "kind": "edit"}}, None
    )
    partial = {"type": "diff", "path": "/w/a.txt", "oldText": "two", "newText": "TWO"}
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed", "content": [partial]}
    out += t.session_update({"update": update}, None)
    result = next(d.data["item"] for d in out if d.type == "item.completed" and d.data["item"]["kind"] == "tool_result")
    (ref,) = [p for p in result["content"] if p["type"] == "file_ref"]
    assert "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n" in ref["diff"]


def test_an_agents_own_patch_gives_the_diff() -> None:
    t = SessionTranslator(tool_style=agent_setup.tool_style(spec("opencode")))
    patch = "Index: /w/a.txt\n===\n--- /w/a.txt\n+++ /w/a.txt\n@@ -2,1 +2,1 @@\n-two\n+TWO\n"
    updates = [
        {"sessionUpdate": "tool_call", "toolCallId": "e2", "title": "edit", "kind": "edit"},
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "e2",
            "status": "completed",
            "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "two", "newText": "TWO"}],
            "rawOutput": {"output": "ok", "metadata": {"diff": patch}},
        },
    ]
    out = []
    for update in updates:
        out += t.session_update({"update": update}, None)
    result = next(d.data["item"] for d in out if d.type == "item.completed" and d.data["item"]["kind"] == "tool_result")
    (ref,) = [p for p in result["content"] if p["type"] == "file_ref"]
    assert ref["diff"] == "--- a/w/a.txt\n+++ b/w/a.txt\n@@ -2,1 +2,1 @@\n-two\n+TWO\n"


def test_error_events_carry_the_agents_own_message() -> None:
    data = rpc_error_data(-32603, "Internal error", {"message": "stream disconnected: 401 Unauthorized"})
    assert data["message"] == "stream disconnected: 401 Unauthorized" and data["code"] == "-32603"
    assert rpc_error_data(-32603, "Internal error", "model not found")["message"] == "model not found"
    assert rpc_error_data(-32000, "Authentication required", None)["message"] == "Authentication required"


# ---- today's versions: what each agent lists decides -------------------------------------------------
CODEX_2_MODES = ["read-only", "workspace-write", "agent", "agent-full-access"]


def test_codex_2_auth_ids_and_login_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    codex = spec("codex")
    methods: list[dict[str, Any]] = [
        {"id": "api-key", "_meta": {"api-key": {"provider": "openai"}}},
        {"id": "chat-gpt"},
    ]
    assert codex.usable_auth_method(methods) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert codex.usable_auth_method(methods) == "api-key"  # 2.x reads the key from its environment
    codex.auth_methods = methods
    assert codex.credentials_available()
    assert codex.credential_variables()[:2] == ["OPENAI_API_KEY", "CODEX_API_KEY"]  # each named once
    monkeypatch.delenv("OPENAI_API_KEY")
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_text("{}")  # a ChatGPT login
    assert codex.usable_auth_method(methods) == "chat-gpt"
    connection = FakeConnection()
    assert asyncio.run(agent_setup.authenticate(connection, codex, {"authMethods": methods})) == "chat-gpt"
    assert connection.sent == [("authenticate", {"methodId": "chat-gpt"})]


@pytest.mark.parametrize(
    ("modes", "permission", "expected"),
    [
        (CODEX_2_MODES, "bypass", "agent-full-access"),
        (["read-only", "auto", "full-access"], "bypass", "full-access"),
        (CODEX_2_MODES, "plan", "read-only"),
        (CODEX_2_MODES, "default", None),  # the agent's own default (2.x: "agent", auto review)
        (CODEX_2_MODES, "acceptEdits", None),
    ],
)
def test_codex_modes_map_onto_whichever_the_version_has(modes: list[str], permission: str, expected: str) -> None:
    new_session = {"configOptions": [option("mode", "mode", modes, modes[0] if expected else "agent")]}
    if expected == modes[0]:
        new_session["configOptions"][0]["currentValue"] = "agent"
    setup, conn = run_configure("codex", config(permission_mode=permission), new_session)
    assert setup.mode == expected
    sent = [p.get("value") for m, p in conn.sent if m == "session/set_config_option"]
    assert sent == ([expected] if expected else [])


def test_a_mode_no_candidate_of_which_the_agent_has_is_refused() -> None:
    new_session = {"configOptions": [option("mode", "mode", ["ask", "code"], "ask")]}
    with pytest.raises(ModeNotSupported):
        run_configure("codex", config(permission_mode="bypass"), new_session)


def test_gemini_model_through_set_model_and_its_permission_modes() -> None:
    new_session = {
        "modes": {"currentModeId": "default", "availableModes": [{"id": m} for m in ("default", "autoEdit", "yolo")]},
        "models": {
            "currentModelId": "gemini-2.5-flash",
            "availableModels": [{"modelId": "gemini-2.5-pro"}, {"modelId": "gemini-3.8-flash"}],
        },
    }
    first = copy.deepcopy(new_session)
    setup, conn = run_configure("gemini", config(model="gemini-3.8-flash", permission_mode="bypass"), first)
    assert ("session/set_model", {"sessionId": "native-1", "modelId": "gemini-3.8-flash"}) in conn.sent
    assert ("session/set_mode", {"sessionId": "native-1", "modeId": "yolo"}) in conn.sent
    assert setup.model == "gemini-3.8-flash" and setup.mode == "yolo"
    # The model it already runs (its --model, which it does not list) is no error and sends nothing.
    setup, conn = run_configure("gemini", config(model="gemini-2.5-flash", permission_mode="acceptEdits"), new_session)
    assert conn.sent == [("session/set_mode", {"sessionId": "native-1", "modeId": "autoEdit"})]


def test_codex_2_names_by_kind_and_output_from_meta() -> None:
    codex = agent_setup.tool_style(spec("codex"))
    for kind, name in (("read", "read"), ("execute", "shell"), (None, "shell")):
        start: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": "c1", "name": "exec_command"}
        start |= {"title": "cat x", "status": "in_progress", "content": [{"type": "terminal", "terminalId": "c1"}]}
        if kind:
            start["kind"] = kind
        deltas = [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "_meta": {key: {"data": text, "terminal_id": "c1"}},
            }
            for key, text in (("terminal_output_delta", "fake-"), ("terminal_output", "shell-ok\n"))
        ]
        end = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "rawOutput": {"exit_code": 0},
        }
        done = translate(codex, [start, *deltas, end])
        assert done[0]["content"][0]["name"] == name
        assert done[-1]["content"][0]["output"] == "fake-shell-ok\n"
    gemini = agent_setup.tool_style(spec("gemini"))
    done = translate(
        gemini,
        [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "g",
                "title": "echo hi",
                "kind": "execute",
                "status": "completed",
            }
        ],
    )
    assert done[0]["content"][0]["name"] == "shell"


@pytest.mark.parametrize(
    ("version", "wanted", "ok"),
    [
        ((20, 20, 2), ">=22", False),
        ((24, 19, 0), ">=22", True),
        ((20, 20, 2), "^20.19.0 || >=22.12", True),
        ((20, 18, 0), "^20.19.0 || >=22.12", False),
        ((20, 1, 0), ">=18.0.0 <21", True),
        ((22, 0, 0), "20.x", False),
    ],
)
def test_node_engines_ranges(version: tuple[int, int, int], wanted: str, ok: bool) -> None:
    assert node_satisfies(version, wanted) is ok
