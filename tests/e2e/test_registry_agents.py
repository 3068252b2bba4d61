"""Agents of the ACP registry by their registry ids (no agents file), as users run them: ``gemini``
(whose package the bridge's gemini profile names) and ``qwen-code`` (the qwen profile), installed
through ``POST /v1/agents/{id}/install`` and driven by ``tests/realagents/legacy.py`` against the fake
LLM in a loopback-only network namespace. The profile brings the tool names, the legacy permission
modes, the auth check and gemini's workaround (it cannot create a file when it reads files through
the client). Fail in CI when the namespace, npm or the registry is missing; skip elsewhere with the
reason, and with ``ACP_BRIDGE_TEST_REAL_AGENTS=0``."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.realagents import fake_llm
from tests.realagents.diffcheck import check_events
from tests.realagents.legacy import ready
from tests.realagents.netns import driver_report

# Real agents from npm in a loopback-only network namespace (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("netns", "npm")

DRIVER_TIMEOUT = 600.0


@pytest.fixture(scope="module", params=["gemini", "qwen-code"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    agent: str = request.param
    installed = ready(agent)
    out = tmp_path_factory.mktemp(f"registry-{agent}") / "report.json"
    argv = [sys.executable, "-m", "tests.realagents.legacy", "--agent", agent, "--out", str(out)]
    report = driver_report(argv, out, DRIVER_TIMEOUT)
    print(f"{agent}: install {installed['seconds']} s, timings {report['timings']}")
    return report


def of_type(result: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [e for e in result.get("events", []) if e["type"] == event_type]


def tool_names(result: dict[str, Any]) -> list[str]:
    return [
        p["name"]
        for e in of_type(result, "item.completed")
        if e["data"]["item"]["kind"] == "tool_call"
        for p in e["data"]["item"]["content"]
        if p["type"] == "tool_call"
    ]


def modes_sent(result: dict[str, Any]) -> list[str]:
    return [s[2] for s in result["settings_sent"] if s[1] == "mode"]


def test_credentials_are_those_the_agent_declares(run: dict[str, Any]) -> None:
    keyless, info = run["keyless_agent_info"], run["agent_info"]
    assert keyless["credentialsAvailable"] is False and info["credentialsAvailable"] is True
    assert info["_meta"]["sandbox-agent/acpRegistry"]["distribution"] == "npx"
    assert info["version"] == run["version"] and info["node"]  # a Node.js program: which one runs it
    created = run["keyless_create"]
    assert created["status"] == 400, created
    details = created["body"]["details"]
    wanted = {"gemini": "GEMINI_API_KEY", "qwen-code": "OPENAI_API_KEY"}[run["agent"]]
    assert wanted in details["variables"] and details["authMethods"], details


def test_a_new_file_is_written_edited_and_its_diffs_apply(run: dict[str, Any]) -> None:
    once = run["cases"]["once"]
    assert once["create"]["status"] == 200, once["create"]
    assert once["files"].get(fake_llm.FILE_NAME) == fake_llm.EDITED_TEXT
    assert of_type(once, "permission.requested"), "legacy default asks"
    for name, result in run["cases"].items():
        files = {f"{result['info']['directory']}/{k}": v for k, v in result["files"].items()}
        check = check_events(result["events"], files)
        assert check.ok and check.missing == 0, (name, check.summary(), check.problems)
        kinds = {e["type"] for e in result["events"]}
        assert not kinds & {"error", "agent.unparsed"}, (name, [e for e in result["events"] if e["type"] == "error"])


def test_the_profile_names_the_tools_and_sets_the_modes(run: dict[str, Any]) -> None:
    cases = run["cases"]
    if run["agent"] == "gemini":
        # As through the agents file with `profile = "gemini"`: not gemini's per-call titles.
        assert tool_names(cases["bypass"]) == ["edit", "edit", "shell"]
        assert tool_names(cases["once"]) == ["edit", "edit", "read", "shell"]
        for name, mode in (("accept_edits", "autoEdit"), ("bypass", "yolo"), ("plan", "plan")):
            assert modes_sent(cases[name]) == [mode], (name, cases[name]["settings_sent"])
        for name in ("accept_edits", "bypass"):
            assert not of_type(cases[name], "permission.requested"), name
        assert cases["accept_edits"]["files"].get(fake_llm.FILE_NAME) == fake_llm.REWRITTEN_TEXT
        assert fake_llm.FILE_NAME not in cases["plan"]["files"]  # plan: read-only
    else:
        assert tool_names(cases["once"]) == ["WriteFile", "Edit", "ReadFile", "Shell"]
        # Its own default is "auto" (asks for what a classifier judges unsafe): legacy default asks.
        assert modes_sent(cases["once"]) == ["default"]
        assert ["authenticate", "openai", None] in cases["once"]["settings_sent"]
        outputs = [
            p["output"]
            for e in of_type(cases["once"], "item.completed")
            if e["data"]["item"]["kind"] == "tool_result"
            for p in e["data"]["item"]["content"]
            if p["type"] == "tool_result"
        ]
        assert outputs[-1] == fake_llm.SHELL_OUTPUT and not outputs[0].startswith("{"), outputs
        assert cases["always"]["files"].get(fake_llm.FILE_NAME) == fake_llm.REWRITTEN_TEXT
        assert modes_sent(cases["accept_edits"]) == ["auto-edit"] and modes_sent(cases["plan"]) == ["plan"]
        assert not of_type(cases["accept_edits"], "permission.requested")
        assert cases["accept_edits"]["files"].get(fake_llm.FILE_NAME) == fake_llm.EDITED_TEXT
        assert fake_llm.FILE_NAME not in cases["plan"]["files"]
    assert fake_llm.FILE_NAME not in cases["reject"]["files"]
