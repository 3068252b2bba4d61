"""Real ACP agents from npm (claude-code-acp, claude-agent-acp, gemini-cli) reading, writing and running a shell
through the bridge.

Everything runs offline inside a loopback-only network namespace: the fake LLM, the bridge and the
agent (see ``tests/realagents/``). One driver run per agent is shared by the tests of this module;
they fail when the namespace, npm or the registry is not available (in CI; elsewhere they skip with
the reason), and skip with ``ACP_BRIDGE_TEST_REAL_AGENTS=0``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.realagents import fake_llm
from tests.realagents.agents import RECIPES, AgentUnavailable, install
from tests.realagents.netns import driver_report, isolation, opted_out, unavailable

DRIVER_TIMEOUT = 240.0


def run_driver(agent: str, out: Path) -> dict[str, Any]:
    opted_out()
    iso = isolation()
    if not iso.available:
        unavailable(iso.reason)
    try:
        command = install(RECIPES[agent])
    except AgentUnavailable as exc:
        unavailable(f"{agent} not installable: {exc}")
    argv = [sys.executable, "-m", "tests.realagents.driver", "--agent", agent]
    argv += ["--agent-command", json.dumps(command), "--out", str(out)]
    return driver_report(argv, out, DRIVER_TIMEOUT)


# claude-agent-acp (the adapter of the legacy `claude` id) runs in test_legacy_agents.py.
@pytest.fixture(scope="module", params=["claude-code", "gemini"])
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    agent: str = request.param
    return run_driver(agent, tmp_path_factory.mktemp(f"real-{agent}") / "report.json")


def of_type(report: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [e for e in report["events"] if e["type"] == event_type]


def completed_items(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["data"]["item"] for e in of_type(report, "item.completed") if e["data"]["item"]["kind"] == kind]


def parts(items: list[dict[str, Any]], part_type: str) -> list[dict[str, Any]]:
    return [p for item in items for p in item["content"] if p.get("type") == part_type]


def advertised(caps: dict[str, Any], method: str) -> bool:
    fs = caps.get("fs") or {}
    flags = {
        "fs/read_text_file": fs.get("readTextFile"),
        "fs/write_text_file": fs.get("writeTextFile"),
        "terminal/create": caps.get("terminal"),
    }
    return bool(flags[method])


def client_path(report: dict[str, Any]) -> str:
    """Which way the agent's files and shell went: the bridge's ACP client services or its own tools."""
    used = sorted(m for m in report.get("agent_requests", {}) if m.startswith(("fs/", "terminal/")))
    return "bridge client services: " + ", ".join(used) if used else "the agent's own tools"


def test_agent_reads_writes_and_runs_a_shell_through_the_bridge(real: dict[str, Any]) -> None:
    print(f"{real['agent']}: files and shell via {client_path(real)}; permissions via {real['permission_path']}")
    assert real["create"]["status"] == 200, real["create"]
    # The file the agent wrote, then edited, is on disk.
    assert real["file"] == fake_llm.EDITED_TEXT
    # The model was really asked once per scripted step, then for the final answer.
    replies = [r["reply"] for r in real["llm_requests"] if r["tools"]]
    assert replies == ["plan", "write", "edit", "read", "shell", "final"], replies
    ended = of_type(real, "turn.ended")
    assert len(ended) == 1 and ended[0]["data"]["metadata"]["stopReason"] == "end_turn", ended
    said = "".join(p["text"] for p in parts(completed_items(real, "message"), "text"))
    assert fake_llm.FINAL_MARK in said
    # The shell really ran: its output (not just the command that prints it) went back to the model,
    # and to the bridge too (a tool result, or the terminal output the bridge itself sent).
    recipe = RECIPES[real["agent"]]
    results = " ".join(r["last_result"] for r in real["llm_requests"])
    assert fake_llm.SHELL_OUTPUT in results.replace(fake_llm.SHELL_COMMAND, "")
    on_wire = fake_llm.SHELL_OUTPUT in real["transcript_text"].replace(fake_llm.SHELL_COMMAND, "")
    assert on_wire == recipe.reports_shell_output
    # The agent uses the bridge's file and terminal services exactly when the bridge advertises them.
    caps = real["client_capabilities"] or {}
    used = real["agent_requests"]
    for method in ("fs/read_text_file", "fs/write_text_file", "terminal/create"):
        expected = advertised(caps, method) and method in recipe.client_services
        assert bool(used.get(method)) == expected, (method, caps, used)
    assert of_type(real, "session.ended"), "terminate records session.ended"


def test_agent_leaves_no_process_behind(real: dict[str, Any]) -> None:
    assert real["terminate_status"] == 204
    assert real["pids_before_terminate"], "the agent's processes were found while it ran"
    assert real["leftover_pids"] == [], "processes of the agent's tree outlived terminate"
    assert real["bridge_children_after_terminate"] == [], "the bridge kept child processes after terminate"


def test_agent_tool_calls_pair_with_results(real: dict[str, Any]) -> None:
    unparsed = [e["data"]["error"] for e in of_type(real, "agent.unparsed")]
    if any(error.startswith("unknown sessionUpdate: tool_call") for error in unparsed):
        pytest.skip("this build does not translate tool_call updates yet (a build that does runs this check)")
    assert unparsed == []
    calls = completed_items(real, "tool_call") or [
        e["data"]["item"] for e in of_type(real, "item.started") if e["data"]["item"]["kind"] == "tool_call"
    ]
    results = completed_items(real, "tool_result")
    call_ids = {p["call_id"] for p in parts(calls, "tool_call")}
    if real["agent"] == "claude-code":  # the vendor's tool names, without the adapter's MCP prefix
        names = {p["name"] for p in parts(calls, "tool_call")}
        assert {"Write", "Edit", "Read", "Bash"} <= names, names
    result_ids = {p["call_id"] for p in parts(results, "tool_result")}
    assert len(call_ids) >= 4, calls  # write, edit, read, shell (+ the plan, for agents that make it a tool)
    assert call_ids == result_ids
    if RECIPES[real["agent"]].reports_shell_output:
        outputs = " ".join(p["output"] for p in parts(results, "tool_result"))
        assert fake_llm.SHELL_OUTPUT in outputs.replace(fake_llm.SHELL_COMMAND, ""), "the shell's output is shown"
    assert all(item["status"] == "completed" for item in results), [r["status"] for r in results]


def test_agent_permissions_are_answered_through_the_bridge(real: dict[str, Any]) -> None:
    if real["permission_path"] != "reply":
        pytest.skip(
            "this build has no permission reply endpoint; the session ran in the agent's no-ask mode "
            "(a build that has it runs this check)"
        )
    requested = of_type(real, "permission.requested")
    assert requested, "both agents ask before writing and editing in their default mode"
    assert all(answer["status"] == 204 for answer in real["permissions_answered"]), real["permissions_answered"]
    resolved = {e["data"]["permission_id"] for e in of_type(real, "permission.resolved")}
    assert {e["data"]["permission_id"] for e in requested} <= resolved
