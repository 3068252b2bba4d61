"""The compatibility matrix: real agents, at chosen versions, driven through the bridge's legacy API
against the fake LLM in a loopback-only network namespace; one row per agent and version.

    .venv/bin/python -m tests.realagents.matrix                      # the versions the bridge installs
    .venv/bin/python -m tests.realagents.matrix --versions latest    # the newest published
    .venv/bin/python -m tests.realagents.matrix --versions codex=0.16.0,claude=0.23.1

claude, codex and opencode (legacy ids) and gemini and qwen-code (ACP registry ids, no agents file)
are installed with ``POST /v1/agents/{agent}/install`` (outside the namespace: npm needs the
registry) and driven by ``tests/realagents/legacy.py``, with only their key and base URL in the
environment; gemini also runs through an agents file (``profile = "gemini"``, npm-installed by the
tests) by ``tests/realagents/driver.py``. Each cell says what was seen; ``n/a`` is a cell the row does
not test (what the agent does not do, or does not tell):

- install: the install call's answer and the version ``/v1/agents`` then shows (and its Node.js);
- start: sessions created; auth: the create without the key refused naming it, ``authenticate`` sent;
- model: the asked model reached the model requests; mode: every legacy permission mode had its
  effect (asks / asks not / refused as root / read-only);
- tools: the stable tool names; diffs: every diff of every session applies (git apply, patch) to
  the file as it was, none missing; permission: once, always and reject;
- shell: the shell's output text in its tool result; usage: each turn's token counts are the fake
  LLM's (and the cost is told where the agent tells one), ``/metrics`` sums them;
- errors: ``error`` and ``agent.unparsed`` events.

``--json FILE`` also writes every cell with its detail. Exit status 1 when a cell failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.agents.profiles import version_key
from tests.realagents import fake_llm
from tests.realagents.agents import RECIPES, VERSIONS_VAR, AgentUnavailable, chosen, install
from tests.realagents.diffcheck import check_events, check_report
from tests.realagents.legacy import install_outside, wanted_version
from tests.realagents.netns import isolation, run_isolated

COLUMNS = (
    "install",
    "start",
    "auth",
    "model",
    "mode",
    "tools",
    "diffs",
    "permission",
    "shell",
    "usage",
    "errors",
)
TIMEOUT = 900.0
OK, FAIL, NA = "ok", "FAIL", "n/a"
Cell = tuple[str, str]  # ok / FAIL / n/a, what was seen


def _events(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in result.get("events", []) if e["type"] == kind]


def _items(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["data"]["item"] for e in _events(result, "item.completed") if e["data"]["item"]["kind"] == kind]


def _parts(result: dict[str, Any], kind: str, part: str) -> list[dict[str, Any]]:
    return [p for item in _items(result, kind) for p in item["content"] if p.get("type") == part]


def _asked_models(result: dict[str, Any]) -> set[str]:
    """The models of the agent's conversation (not of its helpers: codex's auto-review classifier)."""
    return {r["model"] for r in result["llm_requests"] if r["tools"] and not r.get("subagent")}


def _names(result: dict[str, Any]) -> list[str]:
    return [p["name"] for p in _parts(result, "tool_call", "tool_call")]


def _asked(result: dict[str, Any]) -> bool:
    return bool(_events(result, "permission.requested"))


def _file(result: dict[str, Any]) -> str | None:
    files: dict[str, str] = result.get("files", {})
    return files.get(fake_llm.FILE_NAME)


def _final(result: dict[str, Any]) -> str:
    return fake_llm.REWRITTEN_TEXT if "rewrite" in (result.get("steps") or "") else fake_llm.EDITED_TEXT


def _mark(passed: bool) -> str:
    return OK if passed else FAIL


def _check(cells: dict[str, Cell], column: str, test: Callable[[], Cell]) -> None:
    try:
        cells[column] = test()
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AssertionError) as exc:
        cells[column] = (FAIL, f"{type(exc).__name__}: {exc}"[:300])


# ---- what each agent run by tests/realagents/legacy.py is expected to do ----------------------------
@dataclass(frozen=True)
class Expected:
    tools: list[str]  # names of the first scripted run's tools
    first: str = "once"  # that case
    shell: str | None = None  # the shell tool's name (None: its output is not reported)
    asked_first: list[str] = field(default_factory=list)  # the once case's first permission actions
    auth: str | None = None  # the authenticate method sent with the key (None: none needed)
    usage: str | None = None  # how it tells usage: "sum" (every request), "last" (the last one), None
    cost: bool = False  # it tells a cost
    model: bool = True  # a case asks for a model


EXPECTED: dict[str, Expected] = {
    "codex": Expected(
        ["edit", "edit", "read", "shell"], "bypass", "shell", ["fileChange", "fileChange"], "api-key", "sum"
    ),
    "claude": Expected(["Write", "Edit", "Read", "Bash", "Bash"], "once", "Bash", ["Write", "Edit"], None, "sum", True),
    "opencode": Expected(["write", "edit", "read", "bash"], "once", "bash", ["edit", "edit"], None, "last", True),
    "gemini": Expected(["edit", "edit", "read", "shell"], "once", None, ["edit", "edit"], None, "input", model=False),
    "qwen-code": Expected(["WriteFile", "Edit", "ReadFile", "Shell"], "once", "Shell", [], "openai", None, model=False),
}


def expected_for(agent: str, version: str) -> Expected:
    """What a row expects of an agent at a version (codex-acp 0.x: other auth ids, no usage told)."""
    expected = EXPECTED[agent]
    key = version_key(version)
    if agent == "codex" and key is not None and key < (1, 0, 0):
        return dataclasses.replace(expected, auth="openai-api-key", usage=None)
    return expected


def usage_cell(expected: Expected, agent: str, cases: dict[str, dict[str, Any]], metrics: list[dict[str, Any]]) -> Cell:
    told = [(r, m) for r in cases.values() for m in (e["data"]["metadata"] for e in _events(r, "turn.ended"))]
    if expected.usage is None:
        if any("usage" in m for _, m in told):
            return (FAIL, "usage told by an agent not known to tell it: update the matrix")
        return (NA, f"{agent} tells no token usage")
    bad = []
    for result, metadata in told:
        usage = metadata.get("usage")
        most = sum(1 for r in result["llm_requests"] if r["tools"])
        if usage is None or not _fake_usage(expected.usage, usage, most):
            bad.append(usage)
        elif expected.cost and not (metadata.get("cost", {}).get("amount", 0) > 0):
            bad.append(metadata.get("cost"))
    from prometheus_client.parser import text_string_to_metric_families

    summed = {"input": 0, "output": 0}
    counted = {"input": 0.0, "output": 0.0}
    for scraped in metrics:
        for case in scraped["cases"]:
            for event in _events(cases[case], "turn.ended"):
                usage = event["data"]["metadata"].get("usage") or {}
                summed["input"] += usage.get("inputTokens", 0)
                summed["output"] += usage.get("outputTokens", 0)
        for family in text_string_to_metric_families(scraped["text"]):
            for sample in family.samples:
                if sample.name == "acp_bridge_tokens_total" and sample.labels.get("agent") == agent:
                    kind = sample.labels.get("kind", "")
                    if kind in counted:
                        counted[kind] += sample.value
    seen = f"{len(told)} turns as the fake LLM reported ({expected.usage})"
    if expected.cost:
        seen += ", cost in USD"
    seen += f"; /metrics {int(counted['input'])} input, {int(counted['output'])} output tokens"
    ok = not bad and told and all(counted[k] == summed[k] for k in summed)
    return (_mark(bool(ok)), seen if not bad else f"{seen}; not as reported: {bad[:2]}")


def _fake_usage(how: str, usage: dict[str, int], most: int) -> bool:
    llm = fake_llm
    if how == "last":  # the turn's last request
        out = usage.get("outputTokens", 0) + usage.get("thoughtTokens", 0)
        return usage.get("inputTokens") == llm.TOKENS_IN and out == llm.TOKENS_OUT
    if how == "input":  # gemini: its prompt counts (cache included), as _meta.quota tells them
        n, rest = divmod(usage.get("inputTokens", 0), llm.TOKENS_IN + llm.TOKENS_CACHED)
        return rest == 0 and 1 <= n <= most and usage.get("outputTokens") == n * llm.TOKENS_OUT
    n, rest = divmod(usage.get("inputTokens", 0), llm.TOKENS_IN)
    return (
        rest == 0
        and 1 <= n <= most
        and usage.get("outputTokens") == n * llm.TOKENS_OUT
        and usage.get("cachedReadTokens") == n * llm.TOKENS_CACHED
    )


def driver_row(agent: str, version: str, root: Path) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    expected = expected_for(agent, version)
    installed = install_outside(agent, version)
    info = installed.get("agent_info", {})
    shown = info.get("version")
    node = f"; Node.js {info['nodeVersion']}" if info.get("nodeVersion") else ""
    if installed["status"] != 204:
        cells["install"] = (FAIL, installed["body"][-300:])
        return cells
    cells["install"] = (_mark(shown == version), f"204, /v1/agents: {shown}{node} ({installed['seconds']} s)")
    out = root / f"{agent}-{version}.json"
    argv = [sys.executable, "-m", "tests.realagents.legacy", "--agent", agent, "--version", version, "--out", str(out)]
    done = run_isolated(argv, timeout=TIMEOUT)
    if done.returncode != 0 or not out.exists():
        cells["start"] = (FAIL, f"driver failed: {done.stderr[-300:]}")
        return cells
    report = json.loads(out.read_text())
    if "failure" in report:
        cells["start"] = (FAIL, report["failure"][-300:])
        return cells
    cases: dict[str, dict[str, Any]] = report["cases"]
    # Sessions the bridge must create: all but the unknown-model/variant/mode ones and claude's bypass as root.
    refused = {"bypass"} if agent == "claude" and os.geteuid() == 0 else set()
    scripted = {n: c for n, c in cases.items() if not n.startswith("unknown")}
    started = [c for c in scripted.values() if c["create"]["status"] == 200]
    _check(
        cells,
        "start",
        lambda: (
            _mark(all((c["create"]["status"] == 200) != (n in refused) for n, c in scripted.items())),
            f"{len(started)}/{len(scripted)} created" + (" (bypass refused as root)" if refused else ""),
        ),
    )

    def auth() -> Cell:
        keyless = report.get("keyless_create", {})
        variables = keyless.get("body", {}).get("details", {}).get("variables", [])
        named = keyless.get("status") == 400 and any(v in variables for v in _key_vars(agent))
        methods = sorted({s[1] for c in started for s in c["settings_sent"] if s[0] == "authenticate"})
        available = (report["keyless_agent_info"]["credentialsAvailable"], report["agent_info"]["credentialsAvailable"])
        ok = available == (False, True) and (methods == [expected.auth] if expected.auth else not methods)
        if agent == "opencode":  # its key lives in its own config: the create is not refused
            seen = "credentialsAvailable false without OPENAI_API_KEY, true with; none sent"
            return (_mark(ok), seen)
        ok = ok and bool(named)
        sent = ", ".join(methods) if methods else "none needed"
        return (_mark(ok), f"without the key: 400 naming {'/'.join(_key_vars(agent))}; authenticate: {sent}")

    _check(cells, "auth", auth)

    def model() -> Cell:
        if not expected.model:
            return (NA, "no model asked for (the agent's own)")
        once = cases["once"]
        asked = _asked_models(once)
        shown_model = once["info"]["model"]
        if agent == "codex" and "default" in cases:
            default = cases["default"]
            default_models = _asked_models(default)
            ok = asked == {shown_model} and default_models == {default["info"]["model"]}
            return (_mark(ok), f"{shown_model} -> {sorted(asked)}; default {sorted(default_models)} (code mode)")
        ok = all(shown_model.split("[")[0].split("/")[-1] in m or m == shown_model for m in asked)
        return (_mark(ok), f"{shown_model} -> {sorted(asked)}")

    _check(cells, "model", model)
    _check(cells, "mode", lambda: mode_cell(agent, cases))
    first = cases[expected.first]
    runs = [first] + ([cases["default"]] if agent == "codex" and "default" in cases else [])
    _check(
        cells,
        "tools",
        lambda: (
            _mark(all(_names(r) == expected.tools for r in runs)),
            " / ".join(",".join(_names(r)) for r in runs),
        ),
    )

    def diffs() -> Cell:
        checks = check_report(report)
        total = sum(c.diffs for c in checks.values())
        missing = sum(c.missing for c in checks.values())
        ok = all(c.ok for c in checks.values()) and (missing == 0 or agent == "opencode")
        problems = [p for c in checks.values() for p in c.problems]
        seen = f"{total} diffs in {len(checks)} sessions apply to the file as it was"
        if missing:
            seen += f"; {missing} writes it shows no diff for"
        return (_mark(ok and total > 0), seen if not problems else f"{seen}; {problems[0][:200]}")

    _check(cells, "diffs", diffs)

    def permission() -> Cell:
        once, reject = cases["once"], cases["reject"]
        actions = [e["data"]["action"] for e in _events(once, "permission.requested")]
        rejected = {e["data"]["status"] for e in _events(reject, "permission.resolved")}
        ok = _file(once) == fake_llm.EDITED_TEXT and rejected == {"reject"} and _file(reject) is None
        ok = ok and (not expected.asked_first or actions[:2] == expected.asked_first) and bool(actions)
        seen = f"once {','.join(actions)}; reject {sorted(rejected)}"
        if "always" in cases:
            always = cases["always"]
            statuses = {e["data"]["status"] for e in _events(always, "permission.resolved")}
            ok = ok and _file(always) == _final(always) and "accept_for_session" in statuses
            seen += f"; always {sorted(statuses)}"
        return (_mark(ok), seen)

    _check(cells, "permission", permission)

    def shell() -> Cell:
        if expected.shell is None:
            return (NA, "not reported to clients (the agent keeps it for the model)")
        outputs = [p["output"] for p in _parts(first, "tool_result", "tool_result")]
        text = outputs[_names(first).index(expected.shell)]
        return (_mark(text.strip() == fake_llm.SHELL_OUTPUT), repr(text))

    _check(cells, "shell", shell)
    _check(cells, "usage", lambda: usage_cell(expected, agent, cases, report.get("metrics", [])))
    cells["errors"] = _errors(list(cases.values()))
    return cells


def _key_vars(agent: str) -> tuple[str, ...]:
    from tests.realagents.legacy import AGENTS

    return AGENTS[agent].key


def mode_cell(agent: str, cases: dict[str, dict[str, Any]]) -> Cell:
    seen = []
    ok = True
    for name, result in cases.items():
        if name.startswith("unknown") or name in ("once", "always", "reject"):
            continue
        if result["create"]["status"] != 200:
            refused = "root" in str(result["create"]["body"].get("detail"))
            ok &= refused and name == "bypass" and os.geteuid() == 0
            seen.append(f"{name}: 400 as root" if refused else f"{name}: {result['create']['status']}")
            continue
        sent = [s[2] for s in result.get("settings_sent", []) if s[1] == "mode"]
        body = result.get("create_body") or {}
        info = result.get("info") or {}
        asked = "agentMode " + info["agentMode"] if "agentMode" in body else info.get("permissionMode") or name
        seen.append(f"{asked}->{sent[-1] if sent else 'own default'} ({'asks' if _asked(result) else 'asks not'})")
        if name in ("accept_edits", "bypass"):
            ok &= not _asked(result) and _file(result) == _final(result)
        if name == "plan":
            # codex: read-only (the write is refused); claude: its plan mode; gemini: read-only.
            if agent == "claude":
                ok &= sent[-1:] == ["plan"]
            else:
                ok &= _file(result) is None
    if not seen:
        return (NA, "no permission mode asked for beyond the default")
    return (_mark(ok), "; ".join(dict.fromkeys(seen)))


def _errors(results: list[dict[str, Any]]) -> Cell:
    errors = sum(len(_events(r, "error")) for r in results)
    unparsed = sum(len(_events(r, "agent.unparsed")) for r in results)
    return (_mark(errors == 0 and unparsed == 0), f"{errors} error, {unparsed} agent.unparsed")


# ---- gemini through an agents file (profile gemini) -------------------------------------------------
GEMINI_SESSIONS = {
    "model": {"model": "gemini-3.8-flash"},
    "default": {},
    "accept_edits": {"permissionMode": "acceptEdits"},
    "bypass": {"permissionMode": "bypass"},
    "plan": {"permissionMode": "plan"},
}


def gemini_file_row(root: Path) -> tuple[str, dict[str, Cell]]:
    cells: dict[str, Cell] = {}
    try:
        recipe = chosen(RECIPES["gemini"])
        command = install(recipe)
    except AgentUnavailable as exc:
        return RECIPES["gemini"].version, {"install": (FAIL, str(exc))}
    cells["install"] = (NA, f"npm {recipe.spec} by the tests (an agents-file agent: the bridge installs none)")
    out = root / "gemini.json"
    argv = [
        sys.executable,
        "-m",
        "tests.realagents.driver",
        "--agent",
        "gemini",
        "--agent-command",
        json.dumps(command),
    ]
    argv += ["--out", str(out)]
    for name, body in GEMINI_SESSIONS.items():
        argv += ["--extra", f"{name}={json.dumps(body)}"]
    done = run_isolated(argv, timeout=TIMEOUT)
    if done.returncode != 0 or not out.exists():
        return recipe.version, {**cells, "start": (FAIL, done.stderr[-300:])}
    report = json.loads(out.read_text())
    extra: dict[str, dict[str, Any]] = report.get("extra", {})
    created = [n for n, r in extra.items() if r["create"]["status"] == 200]
    ok = report["create"]["status"] == 200 and len(created) == len(extra)
    cells["start"] = (_mark(ok), f"{len(created) + 1} created")
    cells["auth"] = (NA, "its gateway (GOOGLE_GEMINI_BASE_URL) needs no authenticate; the registry row tests auth")

    def model() -> Cell:
        result = extra["model"]
        asked = _asked_models(result)
        return (_mark(asked == {"gemini-3.8-flash"}), f"gemini-3.8-flash -> {sorted(asked)} (session/set_model)")

    _check(cells, "model", model)

    def mode() -> Cell:
        seen, ok = [], True
        for name in ("default", "accept_edits", "bypass", "plan"):
            result = extra[name]
            sent = [p.get("modeId") for m, p in result["settings_sent"] if m == "session/set_mode"]
            asked = bool(_events(result, "permission.requested"))
            seen.append(f"{name}->{sent[-1] if sent else 'default'} ({'asks' if asked else 'asks not'})")
            if name in ("accept_edits", "bypass"):
                ok &= not asked and result["file"] == fake_llm.EDITED_TEXT
            else:
                ok &= result["file"] is None  # asked, rejected (default) or read-only (plan)
        return (_mark(ok), "; ".join(seen))

    _check(cells, "mode", mode)
    bypass = extra.get("bypass", {})
    _check(cells, "tools", lambda: (_mark(_names(bypass) == ["edit", "edit", "shell"]), ",".join(_names(bypass))))

    def diffs() -> Cell:
        checks = [check_events(r.get("events", [])) for r in [report, *extra.values()]]
        total = sum(c.diffs for c in checks)
        ok = all(c.ok for c in checks) and total > 0 and not sum(c.missing for c in checks)
        return (_mark(ok), f"{total} diffs apply to the file as it was")

    _check(cells, "diffs", diffs)
    answered = report.get("permissions_answered", [])
    rejected = extra["default"]["file"] is None and bool(_events(extra["default"], "permission.requested"))
    cells["permission"] = (
        _mark(bool(answered) and rejected),
        f"once: {len(answered)} answered; reject: the default mode asks, nothing written",
    )
    cells["shell"] = (NA, "not reported to clients (gemini keeps it for the model)")

    def usage() -> Cell:
        turns = [e["data"]["metadata"] for e in _events(report, "turn.ended")]
        ok = bool(turns) and all("usage" in m and m["usage"]["inputTokens"] > 0 for m in turns)
        return (_mark(ok), f"{len(turns)} turns tell their tokens (gemini's _meta.quota)")

    _check(cells, "usage", usage)
    cells["errors"] = _errors([report, *extra.values()])
    return recipe.version, cells


# ---- the table -----------------------------------------------------------------------------------
Row = tuple[str, str, dict[str, Cell]]
ROWS: dict[str, str] = {
    "claude": "claude",
    "codex": "codex",
    "opencode": "opencode",
    "gemini": "gemini (registry id)",
    "qwen-code": "qwen-code (registry id)",
    "gemini-file": "gemini (agents file)",
}


def render(rows: list[Row]) -> str:
    date = datetime.date.today().isoformat()
    lines = [f"Compatibility matrix, {date} (tests/realagents/matrix.py; ok = as expected, n/a = not tested)", ""]
    lines.append("| agent | version | " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * (len(COLUMNS) + 2))
    for agent, version, cells in rows:
        marks = [cells[c][0] if c in cells else "-" for c in COLUMNS]
        lines.append(f"| {agent} | {version} | " + " | ".join(marks) + " |")
    lines.append("")
    for agent, version, cells in rows:
        for column in COLUMNS:
            if column in cells:
                mark, seen = cells[column]
                lines.append(f"- {agent} {version} {column}: {mark}: {seen}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--versions", help=f"as {VERSIONS_VAR}: latest, or codex=2.6.0,claude=latest")
    parser.add_argument("--agents", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--json", type=Path, help="write every cell here too")
    args = parser.parse_args(argv)
    if args.versions is not None:
        os.environ[VERSIONS_VAR] = args.versions
    iso = isolation()
    if not iso.available:
        print(f"cannot run: {iso.reason}", file=sys.stderr)
        return 2
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="acp-matrix-") as tmp:
        root = Path(tmp)
        for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
            if agent == "gemini-file":
                version, cells = gemini_file_row(root)
            else:
                version = wanted_version(agent)
                cells = driver_row(agent, version, root)
            rows.append((ROWS.get(agent, agent), version, cells))
            print(f"{agent} {version}: done", file=sys.stderr)
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps([{"agent": a, "version": v, "cells": c} for a, v, c in rows], indent=1))
    # Every cell of every row is tested (ok) or not tested (n/a); a missing one is a failure too.
    return 0 if all(len(c) == len(COLUMNS) and all(m != FAIL for m, _ in c.values()) for _, _, c in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
