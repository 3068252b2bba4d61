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
from tests.realagents.agents import RECIPES, AgentUnavailable, chosen, install
from tests.realagents.diffcheck import check_events
from tests.realagents.netns import driver_report, isolation, opted_out, unavailable

DRIVER_TIMEOUT = 240.0

# Real agents from npm in a loopback-only network namespace (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("netns", "npm")


def run_driver(agent: str, out: Path, extra: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    opted_out()
    iso = isolation()
    if not iso.available:
        unavailable(iso.reason)
    try:
        command = install(chosen(RECIPES[agent]))
    except AgentUnavailable as exc:
        unavailable(f"{agent} not installable: {exc}")
    argv = [sys.executable, "-m", "tests.realagents.driver", "--agent", agent]
    argv += ["--agent-command", json.dumps(command), "--out", str(out)]
    for name, body in (extra or {}).items():
        argv += ["--extra", f"{name}={json.dumps(body)}"]
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


def test_every_diff_applies_to_the_file_as_it_was(real: dict[str, Any]) -> None:
    """The write and the edit each show a diff that applies (git apply, patch) to the file before it."""
    work = Path(real["root"]) / "work"
    check = check_events(real["events"], {str(work / fake_llm.FILE_NAME): real["file"]})
    assert check.ok and check.diffs >= 2 and check.missing == 0, (check.summary(), check.problems)


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


# gemini through `profile = "gemini"`: the asked model and the legacy permission modes take effect.
GEMINI_SESSIONS = {
    "model": {"model": "gemini-3.8-flash"},
    "accept_edits": {"permissionMode": "acceptEdits"},
    "bypass": {"permissionMode": "bypass"},
    "default": {},
}


@pytest.fixture(scope="module")
def gemini(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("gemini-modes") / "report.json"
    report = run_driver("gemini", out, GEMINI_SESSIONS)
    assert set(report.get("extra", {})) == set(GEMINI_SESSIONS), report.get("extra")
    return report


def test_gemini_runs_the_asked_model(gemini: dict[str, Any]) -> None:
    result = gemini["extra"]["model"]
    assert result["create"]["status"] == 200, result["create"]
    assert result["info"]["model"] == "gemini-3.8-flash"
    assert ["session/set_model", {"sessionId": result["info"]["nativeSessionId"], "modelId": "gemini-3.8-flash"}] in [
        [m, {k: v for k, v in p.items() if k in ("sessionId", "modelId")}] for m, p in result["settings_sent"]
    ], result["settings_sent"]
    asked = {r["model"] for r in result["llm_requests"] if r["tools"]}
    assert asked == {"gemini-3.8-flash"}, asked


def test_gemini_permission_modes_take_effect(gemini: dict[str, Any]) -> None:
    for name, mode in (("accept_edits", "autoEdit"), ("bypass", "yolo")):
        result = gemini["extra"][name]
        assert result["create"]["status"] == 200, result["create"]
        modes = [p.get("modeId") for m, p in result["settings_sent"] if m == "session/set_mode"]
        assert modes == [mode], (name, result["settings_sent"])
        assert not of_type(result, "permission.requested"), name  # nothing asked: every reply would reject
        assert result["file"] == fake_llm.EDITED_TEXT, (name, result["file"])
    # default: gemini's own default mode asks, and the rejected write leaves no file.
    default = gemini["extra"]["default"]
    assert of_type(default, "permission.requested") and default["file"] is None
    for name, result in gemini["extra"].items():  # every diff applies to the file as it was
        path = Path(gemini["root"]) / "work" / name / fake_llm.FILE_NAME
        check = check_events(result["events"], {str(path): result["file"]} if result["file"] else {})
        assert check.ok and check.missing == 0, (name, check.summary(), check.problems)


def test_gemini_tool_names_are_stable(gemini: dict[str, Any]) -> None:
    result = gemini["extra"]["bypass"]
    names = [p["name"] for p in parts(completed_items(result, "tool_call"), "tool_call")]
    assert names == ["edit", "edit", "shell"], names  # not the per-call titles ("echo fake-shell-ok")
    for result in gemini["extra"].values():
        kinds = {e["type"] for e in result.get("events", [])}
        assert not kinds & {"error", "agent.unparsed"}, kinds
