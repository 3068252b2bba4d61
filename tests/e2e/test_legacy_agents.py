"""The legacy agent ids ``codex``, ``claude`` and ``opencode`` run as users run them: installed through
``POST /v1/agents/{agent}/install``, configured with the agent's own settings and key, against the fake
LLM inside a loopback-only network namespace (``tests/realagents/legacy.py``).

The install runs outside the namespace (npm needs the registry), into an install dir kept in the test
cache; the driver's own install call then finds it installed. One driver run per agent is shared by
the tests of this module. They fail when the namespace, npm or the registry is not available (skip
outside CI, with the reason), and skip everywhere with ``ACP_BRIDGE_TEST_REAL_AGENTS=0``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from app.agents.profiles import version_key
from tests.realagents import fake_llm
from tests.realagents.diffcheck import applied, check_events
from tests.realagents.legacy import ready
from tests.realagents.netns import driver_report

DRIVER_TIMEOUT = 600.0
PLAN_PREFIX = "Make a plan before acting."

# Real agents from npm in a loopback-only network namespace (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("netns", "npm")


@pytest.fixture(scope="module", params=["codex", "claude", "opencode"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    agent: str = request.param
    installed = ready(agent)
    out = tmp_path_factory.mktemp(f"legacy-{agent}") / "report.json"
    argv = [sys.executable, "-m", "tests.realagents.legacy", "--agent", agent, "--out", str(out)]
    report = driver_report(argv, out, DRIVER_TIMEOUT)
    assert report["install"]["status"] == 204, report["install"]  # installed: the call is a no-op
    print(f"{agent}: install {installed['seconds']} s, timings {report['timings']}")
    return report


def case(report: dict[str, Any], name: str) -> dict[str, Any]:
    result: dict[str, Any] = report["cases"][name]
    return result


def of_type(result: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [e for e in result.get("events", []) if e["type"] == event_type]


def items(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["data"]["item"] for e in of_type(result, "item.completed") if e["data"]["item"]["kind"] == kind]


def parts(found: list[dict[str, Any]], part_type: str) -> list[dict[str, Any]]:
    return [p for item in found for p in item["content"] if p.get("type") == part_type]


def tool_names(result: dict[str, Any]) -> list[str]:
    return [p["name"] for p in parts(items(result, "tool_call"), "tool_call")]


def file_refs(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in parts(items(result, "tool_result"), "file_ref") if p["action"] in ("write", "patch")]


def conversation(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The model requests of the agent's conversation (not those of its helpers, such as codex's
    auto-review classifier, which it may call now and then)."""
    return [r for r in result["llm_requests"] if r["tools"] and not r.get("subagent")]


def models_asked(result: dict[str, Any]) -> set[str]:
    return {r["model"] for r in conversation(result)}


def work_dir(result: dict[str, Any]) -> str:
    return str(result["info"]["directory"])


def final_text(result: dict[str, Any]) -> str:
    """The file a case's scripted steps leave: written, edited, and maybe written again."""
    return fake_llm.REWRITTEN_TEXT if "rewrite" in (result.get("steps") or "") else fake_llm.EDITED_TEXT


def assert_scripted_turn(result: dict[str, Any]) -> None:
    assert result["create"]["status"] == 200, result["create"]
    assert result["files"].get(fake_llm.FILE_NAME) == final_text(result), result["files"]
    ended = of_type(result, "turn.ended")
    assert ended and ended[-1]["data"]["metadata"]["stopReason"] == "end_turn", ended
    said = "".join(p["text"] for p in parts(items(result, "message"), "text"))
    assert fake_llm.FINAL_MARK in said
    assert result["terminate_status"] == 204 and of_type(result, "session.ended")


def assert_whole_diffs(result: dict[str, Any]) -> None:
    """The write shows the whole new file (created: ``--- /dev/null``); the edit, applied to it, gives
    the edited file: its hunk has the changed line's true number, whatever the agent sent."""
    refs = {ref["action"]: ref for ref in file_refs(result)}
    path = f"{work_dir(result)}/{fake_llm.FILE_NAME}"
    body = "".join(f"+{line}\n" for line in fake_llm.FILE_TEXT.splitlines())
    assert refs["write"]["diff"] == f"--- /dev/null\n+++ b/{path.lstrip('/')}\n@@ -0,0 +1,10 @@\n{body}"
    edit = refs["patch"]["diff"]
    assert applied(edit, fake_llm.FILE_TEXT, path) == fake_llm.EDITED_TEXT, edit
    assert "\n-line two\n+line two (edited)\n" in edit and "No newline" not in edit, edit


def diff_check(result: dict[str, Any]) -> Any:
    """Every diff of a case applied in turn (git apply, patch) from no file to the file it left."""
    files = {f"{work_dir(result)}/{name}": text for name, text in result["files"].items()}
    return check_events(result.get("events", []), files)


def test_agent_without_its_key_is_refused_by_name(run: dict[str, Any]) -> None:
    info = run["keyless_agent_info"]
    assert info["credentialsAvailable"] is False
    assert run["agent_info"]["credentialsAvailable"] is True
    if run["agent"] == "opencode":
        return  # its key lives in its own config (the bridge cannot tell it is missing)
    created = run["keyless_create"]
    assert created["status"] == 400, created
    assert created["body"]["detail"].startswith(f"invalid request: agent {run['agent']} has no credentials")
    key = {"codex": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY"}[run["agent"]]
    assert key in created["body"]["details"]["variables"]


def newer(run: dict[str, Any], than: tuple[int, int, int]) -> bool:
    """The run's agent version is at least ``than`` (codex-acp 2.x, claude-agent-acp 0.24+)."""
    key = version_key(run["version"])
    return key is None or key >= than  # `latest` and the like are the newest


def codex_2(run: dict[str, Any]) -> bool:
    return run["agent"] == "codex" and newer(run, (1, 0, 0))


def test_the_installed_copy_and_its_version_are_shown(run: dict[str, Any]) -> None:
    info = run["agent_info"]
    assert info["installed"] and info["source"] == "installed", info
    assert info["version"] == run["version"], (info, run["version"])
    system = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout
    if run["agent"] == "claude" and newer(run, (0, 24, 0)) and int(system.strip().lstrip("v").split(".")[0]) < 22:
        # claude-agent-acp 0.101 needs Node.js >= 22: it runs with the bridge's own (brought on demand).
        assert info["node"].endswith("/node") and info["path"].endswith("claude-agent-acp"), info


def test_no_error_and_no_unparsed_agent_message(run: dict[str, Any]) -> None:
    for name, result in run["cases"].items():
        kinds = [e["type"] for e in result.get("events", [])]
        assert "error" not in kinds and "agent.unparsed" not in kinds, (
            name,
            [e for e in result["events"] if e["type"] in ("error", "agent.unparsed")],
        )


def test_models_come_from_the_agent_and_reach_the_model(run: dict[str, Any]) -> None:
    models = run["models_after"]
    ids = [m["id"] for m in models["models"]]
    assert ids and models["defaultModel"] in ids, models
    agent = run["agent"]
    if codex_2(run):
        # The default model (code mode: tools run from JavaScript), and one asked for.
        assert models_asked(case(run, "default")) == {models["defaultModel"]}
        assert case(run, "default")["info"]["model"] == models["defaultModel"]
        assert models_asked(case(run, "once")) == {"gpt-6.1-sol"} and models_asked(case(run, "bypass")) == {"gpt-5.5"}
        assert case(run, "bypass")["info"]["model"] == "gpt-5.5"
        assert "no-such-model" in case(run, "unknown_model")["create"]["body"]["detail"]
        assert "gpt-5.5" in case(run, "unknown_model")["create"]["body"]["details"]["validModels"]
    elif agent == "codex":
        assert models_asked(case(run, "once")) == {"gpt-5.4-mini"}
        assert case(run, "once")["info"]["model"] == "gpt-5.4-mini"
        assert "no-such-model" in case(run, "unknown_model")["create"]["body"]["detail"]
        assert "gpt-5.4-mini" in case(run, "unknown_model")["create"]["body"]["details"]["validModels"]
    elif agent == "claude":
        # The agent's own ids ("opus[1m]" up to 0.23, "opus" since); "opus" (legacy) and vendor ids map onto them.
        opus = "opus" if newer(run, (0, 24, 0)) else "opus[1m]"
        assert opus in ids
        once = case(run, "once")
        assert once["info"]["model"] == opus
        assert all("opus" in model for model in models_asked(once)), models_asked(once)
        always = case(run, "always")  # asked for claude-sonnet-4-5: the agent's sonnet option
        assert always["info"]["model"].startswith("sonnet")
        assert all("sonnet" in model for model in models_asked(always))
        assert case(run, "unknown_model")["create"]["status"] == 400
    else:
        assert "fake/fake-large" in ids
        assert models_asked(case(run, "once")) == {"fake-large"}
        assert case(run, "once")["info"]["model"] == "fake/fake-large"


def test_tools_have_stable_names_and_real_output(run: dict[str, Any]) -> None:
    agent = run["agent"]
    # codex: both its model kinds (code mode on 2.x's default model); the others: the once case.
    firsts = ["bypass", "default"] if codex_2(run) else ["bypass" if agent == "codex" else "once"]
    for first in map(lambda name: case(run, name), firsts):
        assert_scripted_turn(first)
        names = tool_names(first)
        expected = {
            "codex": ["edit", "edit", "read", "shell"],
            "claude": ["Write", "Edit", "Read", "Bash", "Bash"],
            "opencode": ["write", "edit", "read", "bash"],
        }[agent]
        assert names == expected, names
        outputs = [p["output"] for p in parts(items(first, "tool_result"), "tool_result")]
        shell_index = names.index({"codex": "shell", "claude": "Bash", "opencode": "bash"}[agent])
        assert outputs[shell_index].strip() == fake_llm.SHELL_OUTPUT, outputs  # the command's text, not JSON
        if agent == "codex":  # the file's text as `cat` printed it
            assert outputs[names.index("read")] == fake_llm.EDITED_TEXT, outputs
        assert_whole_diffs(first)


def test_permissions_once_always_reject(run: dict[str, Any]) -> None:
    once, always, reject = case(run, "once"), case(run, "always"), case(run, "reject")
    assert_scripted_turn(once)
    requested = of_type(once, "permission.requested")
    assert len(requested) >= 2 and all(a["status"] == 204 for a in once["permissions_answered"])
    actions = [e["data"]["action"] for e in requested]
    assert (
        actions[:2]
        == {
            "codex": ["fileChange", "fileChange"],
            "claude": ["Write", "Edit"],
            "opencode": ["edit", "edit"],
        }[run["agent"]]
    ), actions
    assert {e["data"]["status"] for e in of_type(once, "permission.resolved")} == {"accept"}
    # always: the agent (or the bridge, for a later request with the same keys) approves the edit too.
    assert always["files"].get(fake_llm.FILE_NAME) == final_text(always)
    assert "accept_for_session" in {e["data"]["status"] for e in of_type(always, "permission.resolved")}
    # reject: nothing written, the tool failed.
    assert fake_llm.FILE_NAME not in reject["files"], reject["files"]
    assert {e["data"]["status"] for e in of_type(reject, "permission.resolved")} == {"reject"}
    results = items(reject, "tool_result")
    assert results and results[0]["status"] == "failed"


def test_modes_behave_as_named(run: dict[str, Any]) -> None:
    agent = run["agent"]
    if codex_2(run):
        bypass = case(run, "bypass")
        assert ["authenticate", "api-key", None] in bypass["settings_sent"]  # only OPENAI_API_KEY set
        assert ["set_config_option", "mode", "agent-full-access"] in bypass["settings_sent"], bypass["settings_sent"]
        assert ["set_config_option", "reasoning_effort", "high"] in bypass["settings_sent"]
        assert bypass["permissions_answered"] == [] and not of_type(bypass, "permission.requested")
        assert {r["effort"] for r in conversation(bypass)} == {"high"}  # variant -> reasoning effort
        assert bypass["info"]["agentMode"] == "build" and bypass["info"]["variant"] == "high"
        # default and acceptEdits leave codex on its own default ("auto review"): these edits pass unasked.
        for name in ("default", "accept_edits"):
            result = case(run, name)
            assert not any(s[0] == "set_config_option" and s[1] == "mode" for s in result["settings_sent"])
            assert result["files"].get(fake_llm.FILE_NAME) == final_text(result)
            assert not of_type(result, "permission.requested")
        plan = case(run, "plan")
        assert ["set_config_option", "mode", "read-only"] in plan["settings_sent"]
        assert all(r["prompt"].startswith(PLAN_PREFIX) for r in conversation(plan))
        assert of_type(plan, "permission.requested"), "read-only asks before writing"
        assert fake_llm.FILE_NAME not in plan["files"]
        assert "turbo" in case(run, "unknown_variant")["create"]["body"]["detail"]
    elif agent == "codex":
        bypass = case(run, "bypass")  # codex's default config starts read-only: bypass must change that
        assert ["authenticate", "openai-api-key", None] in bypass["settings_sent"]  # only OPENAI_API_KEY set
        assert ["set_config_option", "mode", "full-access"] in bypass["settings_sent"], bypass["settings_sent"]
        assert ["set_config_option", "reasoning_effort", "high"] in bypass["settings_sent"]
        assert bypass["permissions_answered"] == [] and not of_type(bypass, "permission.requested")
        assert {r["effort"] for r in conversation(bypass)} == {"high"}  # variant -> reasoning effort
        assert bypass["info"]["agentMode"] == "build" and bypass["info"]["variant"] == "high"
        plan = case(run, "plan")
        assert not any(s[2] == "full-access" for s in plan["settings_sent"])  # read-only, codex's start mode
        assert all(r["prompt"].startswith(PLAN_PREFIX) for r in conversation(plan))
        assert of_type(plan, "permission.requested"), "read-only asks before writing"
        assert fake_llm.FILE_NAME not in plan["files"]
        assert "ultra" in case(run, "unknown_variant")["create"]["body"]["detail"]
    elif agent == "claude":
        accept = case(run, "accept_edits")
        assert accept["files"].get(fake_llm.FILE_NAME) == final_text(accept)
        assert not of_type(accept, "permission.requested")  # claude's own acceptEdits mode
        assert accept["info"]["agentMode"] == "build" and accept["info"]["permissionMode"] == "acceptEdits"
        assert ["set_config_option", "mode", "acceptEdits"] in accept["settings_sent"], accept["settings_sent"]
        # plan is claude's own plan mode (what the model does in it is up to the model).
        assert ["set_config_option", "mode", "plan"] in case(run, "plan")["settings_sent"]
        # default is claude's `default` (it asks), set explicitly: since 0.101 its own start mode is `auto`.
        assert ["set_config_option", "mode", "default"] in case(run, "once")["settings_sent"]
        bypass = case(run, "bypass")
        if os.geteuid() == 0:  # claude refuses to skip permissions as root: a 400, as legacy
            assert bypass["create"]["status"] == 400 and "root" in bypass["create"]["body"]["detail"]
        else:
            assert ["set_config_option", "mode", "bypassPermissions"] in bypass["settings_sent"]
            assert not of_type(bypass, "permission.requested")
            assert bypass["files"].get(fake_llm.FILE_NAME) == final_text(bypass)
    else:
        plan = case(run, "plan")
        assert ["set_config_option", "mode", "plan"] in plan["settings_sent"]
        assert plan["info"]["agentMode"] == "plan"
        assert fake_llm.FILE_NAME not in plan["files"], "opencode's plan agent does not edit"
        unknown = case(run, "unknown_mode")["create"]
        assert unknown["status"] == 400 and unknown["body"]["type"].endswith("mode_not_supported")
        modes = [m["id"] for m in run["modes_after"]["modes"]]
        assert {"build", "plan", "custom"} <= set(modes), modes


def test_every_diff_applies_to_the_file_as_it_was(run: dict[str, Any]) -> None:
    """Write, edit and write again (claude's Edit sends trimmed snippets; the bridge shows exact
    diffs all the same): each diff applies with git apply and patch, in turn, to the file before it."""
    total = 0
    for name, result in run["cases"].items():
        if result["create"]["status"] != 200:
            continue
        check = diff_check(result)
        assert check.ok, (name, check.summary(), check.problems)
        # opencode shows no diff for a write it does not ask about (its tool call has none, and it
        # writes the file itself before it writes it through the bridge): that file_ref has none.
        assert check.missing == 0 or run["agent"] == "opencode", (name, check.summary())
        total += check.diffs
    rewrites = [
        r for r in run["cases"].values() if "rewrite" in (r.get("steps") or "") and r["create"]["status"] == 200
    ]
    assert rewrites and all(diff_check(r).diffs + diff_check(r).missing >= 3 for r in rewrites)
    print(f"{run['agent']}: {total} diffs, all apply")


def turn_usages(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["data"]["metadata"] for e in of_type(result, "turn.ended")]


def requests_asked(result: dict[str, Any]) -> int:
    """The model requests of a case that the fake LLM answered with usage (those with tools)."""
    return sum(1 for r in result["llm_requests"] if r["tools"])


def assert_fake_usage(agent: str, usage: dict[str, int], most: int) -> None:
    """A turn's token counts are what the fake LLM reported for its requests, as the agent adds
    them up: n requests (1 <= n <= ``most``) for claude and codex, the last one for opencode."""
    llm = fake_llm
    if agent == "opencode":  # opencode tells the turn's last model call (its thoughts apart)
        assert usage["inputTokens"] == llm.TOKENS_IN and usage["cachedReadTokens"] == llm.TOKENS_CACHED, usage
        assert usage["outputTokens"] + usage.get("thoughtTokens", 0) == llm.TOKENS_OUT, usage
        assert usage["totalTokens"] == llm.TOKENS_IN + llm.TOKENS_CACHED + llm.TOKENS_OUT, usage
        return
    n, rest = divmod(usage["inputTokens"], llm.TOKENS_IN)
    assert rest == 0 and 1 <= n <= most, (usage, most)
    assert usage["outputTokens"] == n * llm.TOKENS_OUT and usage["cachedReadTokens"] == n * llm.TOKENS_CACHED, usage
    if agent == "claude":  # Anthropic counts cache writes apart, and no thoughts
        assert usage["cachedWriteTokens"] == n * llm.TOKENS_CACHE_WRITE, usage
        assert usage["totalTokens"] == n * (llm.TOKENS_IN + llm.TOKENS_CACHED + llm.TOKENS_CACHE_WRITE + llm.TOKENS_OUT)
    else:  # codex: the reasoning of the answers that thought
        thought, rest = divmod(usage.get("thoughtTokens", 0), llm.TOKENS_THOUGHT)
        assert rest == 0 and thought <= n, usage
        assert usage["totalTokens"] == n * (llm.TOKENS_IN + llm.TOKENS_CACHED + llm.TOKENS_OUT), usage


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_turns_carry_the_tokens_and_cost_the_model_reported(run: dict[str, Any]) -> None:
    agent = run["agent"]
    if agent == "codex" and not newer(run, (1, 0, 0)):
        pytest.skip("codex-acp 0.x tells no token usage")
    told = 0
    for result in run["cases"].values():
        for metadata in turn_usages(result):
            assert "usage" in metadata, metadata  # every turn of these agents tells its usage
            assert_fake_usage(agent, metadata["usage"], requests_asked(result))
            told += 1
            if agent in ("claude", "opencode"):  # they tell a cost, in USD
                assert metadata["cost"]["currency"] == "USD" and metadata["cost"]["amount"] > 0, metadata
            assert metadata["context"]["size"] > 0, metadata
    assert told >= 3
    # /metrics sums what the turns of each bridge told.
    for scraped in run["metrics"]:
        samples = metric_samples(scraped["text"])
        turns = [m for name in scraped["cases"] for m in turn_usages(run["cases"][name])]
        for key, kind in (("inputTokens", "input"), ("outputTokens", "output"), ("cachedReadTokens", "cached_read")):
            summed = sum(m["usage"].get(key, 0) for m in turns)
            assert (
                samples.get(("acp_bridge_tokens_total", frozenset({"agent": agent, "kind": kind}.items())), 0) == summed
            )
        cost = sum(m["cost"]["amount"] for m in turns if "cost" in m)
        counted = samples.get(("acp_bridge_cost_usd_total", frozenset({"agent": agent}.items())), 0.0)
        assert abs(counted - cost) < 1e-9, (counted, cost)


def test_codex_turns_show_the_legacy_token_usage_status(run: dict[str, Any]) -> None:
    if run["agent"] != "codex" or not newer(run, (1, 0, 0)):
        pytest.skip("codex 2.x only (legacy showed codex's token usage as a status item)")
    result = case(run, "default")
    statuses = [i for i in items(result, "status") if i["content"][0]["label"] == "thread.token_usage.updated"]
    assert len(statuses) == len(turn_usages(result)) == 1
    detail = json.loads(statuses[0]["content"][0]["detail"])
    assert detail["threadId"] == result["info"]["nativeSessionId"]
    assert detail["tokenUsage"]["last"]["inputTokens"] == turn_usages(result)[0]["usage"]["inputTokens"]
