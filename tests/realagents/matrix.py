"""The compatibility matrix: real agents, at chosen versions, driven through the bridge's legacy API
against the fake LLM in a loopback-only network namespace; one row per agent and version.

    .venv/bin/python -m tests.realagents.matrix                      # the versions the bridge installs
    .venv/bin/python -m tests.realagents.matrix --versions latest    # the newest published
    .venv/bin/python -m tests.realagents.matrix --versions codex=0.16.0,claude=0.23.1

claude and codex are installed with ``POST /v1/agents/{agent}/install`` (outside the namespace: npm
needs the registry) and driven through the legacy ids by ``tests/realagents/legacy.py``, with only
``OPENAI_API_KEY``/``ANTHROPIC_API_KEY`` in the environment; gemini (newest = the recipe's version)
runs through ``profile = "gemini"`` by ``tests/realagents/driver.py``. Each cell says what was seen:

- install: the install call's answer and the version ``/v1/agents`` then shows;
- start, auth: sessions created, the ``authenticate`` method sent;
- model: the asked model reached the model requests;
- mode: every legacy permission mode had its effect (asks / asks not / refused as root);
- tools: the stable tool names; diffs: whole-file diffs; permission: once, always and reject;
- shell: the shell's output text in its tool result; errors: ``error`` and ``agent.unparsed`` events.

``--json FILE`` also writes every cell with its detail. Exit status 1 when a cell failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.realagents import fake_llm
from tests.realagents.agents import RECIPES, VERSIONS_VAR, AgentUnavailable, chosen, install
from tests.realagents.legacy import install_outside, wanted_version
from tests.realagents.netns import isolation, run_isolated

COLUMNS = ("install", "start", "auth", "model", "mode", "tools", "diffs", "permission", "shell", "errors")
TIMEOUT = 900.0
Cell = tuple[bool, str]  # passed, what was seen


def _events(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in result.get("events", []) if e["type"] == kind]


def _items(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["data"]["item"] for e in _events(result, "item.completed") if e["data"]["item"]["kind"] == kind]


def _parts(result: dict[str, Any], kind: str, part: str) -> list[dict[str, Any]]:
    return [p for item in _items(result, kind) for p in item["content"] if p.get("type") == part]


def _names(result: dict[str, Any]) -> list[str]:
    return [p["name"] for p in _parts(result, "tool_call", "tool_call")]


def _asked(result: dict[str, Any]) -> bool:
    return bool(_events(result, "permission.requested"))


def _edited(result: dict[str, Any]) -> bool:
    return bool(result.get("files", {}).get(fake_llm.FILE_NAME) == fake_llm.EDITED_TEXT)


def _check(cells: dict[str, Cell], column: str, test: Callable[[], Cell]) -> None:
    try:
        cells[column] = test()
    except (KeyError, IndexError, TypeError, ValueError, StopIteration) as exc:
        cells[column] = (False, f"{type(exc).__name__}: {exc}")


# ---- claude and codex through the legacy ids ---------------------------------------------------------
LEGACY_EXPECTED = {
    "codex": (["edit", "edit", "read", "shell"], "shell", ["fileChange", "fileChange"]),
    "claude": (["Write", "Edit", "Read", "Bash", "Bash"], "Bash", ["Write", "Edit"]),
}


def legacy_row(agent: str, version: str, root: Path) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    installed = install_outside(agent, version)
    shown = installed.get("agent_info", {}).get("version")
    ok = installed["status"] == 204 and shown == version
    cells["install"] = (ok, f"{installed['status']}, /v1/agents: {shown} ({installed['seconds']} s)")
    if installed["status"] != 204:
        cells["install"] = (False, installed["body"][-300:])
        return cells
    out = root / f"{agent}-{version}.json"
    argv = [sys.executable, "-m", "tests.realagents.legacy", "--agent", agent, "--version", version, "--out", str(out)]
    done = run_isolated(argv, timeout=TIMEOUT)
    if done.returncode != 0 or not out.exists():
        cells["start"] = (False, f"driver failed: {done.stderr[-300:]}")
        return cells
    report = json.loads(out.read_text())
    if "failure" in report:
        cells["start"] = (False, report["failure"][-300:])
        return cells
    cases: dict[str, dict[str, Any]] = report["cases"]
    names, shell_name, asked_first = LEGACY_EXPECTED[agent]
    # Sessions the bridge must create: all but the unknown-model/variant ones and claude's bypass as root.
    refused = {"bypass"} if agent == "claude" and os.geteuid() == 0 else set()
    scripted = {n: c for n, c in cases.items() if not n.startswith("unknown")}
    started = [c for c in scripted.values() if c["create"]["status"] == 200]
    _check(
        cells,
        "start",
        lambda: (
            all((c["create"]["status"] == 200) != (n in refused) for n, c in scripted.items()),
            f"{len(started)}/{len(scripted)} created",
        ),
    )

    def auth() -> Cell:
        methods = {s[1] for c in started for s in c["settings_sent"] if s[0] == "authenticate"}
        if agent == "claude":
            return (not methods, "none needed (ANTHROPIC_API_KEY)")
        return (bool(methods), ", ".join(sorted(methods)) + " (OPENAI_API_KEY)")

    _check(cells, "auth", auth)

    def model() -> Cell:
        once = cases["once"]
        asked = {r["model"] for r in once["llm_requests"] if r["tools"]}
        shown_model = once["info"]["model"]
        if agent == "codex" and "default" in cases:
            default = cases["default"]
            default_models = {r["model"] for r in default["llm_requests"] if r["tools"]}
            ok = asked == {shown_model} and default_models == {default["info"]["model"]}
            return (ok, f"{shown_model} asked -> {sorted(asked)}; default {sorted(default_models)} (code mode)")
        return (
            all(shown_model.split("[")[0] in m or m == shown_model for m in asked),
            f"{shown_model} -> {sorted(asked)}",
        )

    _check(cells, "model", model)

    def mode() -> Cell:
        seen = []
        ok = True
        for name, result in cases.items():
            body = result["create"]["body"] if result["create"]["status"] != 200 else None
            if name.startswith("unknown"):
                continue
            mode_sent = [s[2] for s in result.get("settings_sent", []) if s[1] == "mode"]
            info = result.get("info") or {}
            permission = info.get("permissionMode") or name
            if body is not None:
                refused = "root" in str(body.get("detail"))
                ok &= refused and name == "bypass" and os.geteuid() == 0
                seen.append(f"{name}: 400 as root" if refused else f"{name}: {result['create']['status']}")
                continue
            what = "asks" if _asked(result) else "asks not"
            seen.append(f"{permission}->{mode_sent[-1] if mode_sent else 'own default'} ({what})")
            if name in ("accept_edits", "bypass"):
                ok &= not _asked(result) and _edited(result)
            if name == "plan":  # codex: read-only; claude: its own plan mode (the model decides what it does)
                ok &= fake_llm.FILE_NAME not in result["files"] if agent == "codex" else mode_sent[-1:] == ["plan"]
        return (ok, "; ".join(dict.fromkeys(seen)))

    _check(cells, "mode", mode)
    first = cases["bypass" if agent == "codex" else "once"]
    runs = [first] + ([cases["default"]] if "default" in cases else [])
    _check(
        cells,
        "tools",
        lambda: (all(_names(r) == names for r in runs), " / ".join(",".join(_names(r)) for r in runs)),
    )

    def diffs() -> Cell:
        refs = {p["action"]: p for p in _parts(first, "tool_result", "file_ref") if p["action"] in ("write", "patch")}
        write_ok = refs["write"]["diff"].endswith("@@ -0,0 +1,2 @@\n+hello from fake llm\n+line two\n")
        edit_ok = "\n-line two\n" in refs["patch"]["diff"] and "\n+line two (edited)\n" in refs["patch"]["diff"]
        return (write_ok and edit_ok, "write whole file, edit its line" if write_ok and edit_ok else str(refs)[:200])

    _check(cells, "diffs", diffs)

    def permission() -> Cell:
        once, always, reject = cases["once"], cases["always"], cases["reject"]
        actions = [e["data"]["action"] for e in _events(once, "permission.requested")]
        statuses = {e["data"]["status"] for e in _events(always, "permission.resolved")}
        rejected = {e["data"]["status"] for e in _events(reject, "permission.resolved")}
        ok = actions[:2] == asked_first and _edited(once) and _edited(always) and "accept_for_session" in statuses
        ok &= rejected == {"reject"} and fake_llm.FILE_NAME not in reject["files"]
        return (ok, f"once {','.join(actions)}; always {sorted(statuses)}; reject {sorted(rejected)}")

    _check(cells, "permission", permission)

    def shell() -> Cell:
        outputs = [p["output"] for p in _parts(first, "tool_result", "tool_result")]
        text = outputs[_names(first).index(shell_name)]
        return (text.strip() == fake_llm.SHELL_OUTPUT, repr(text))

    _check(cells, "shell", shell)
    cells["errors"] = _errors(list(cases.values()))
    return cells


def _errors(results: list[dict[str, Any]]) -> Cell:
    errors = sum(len(_events(r, "error")) for r in results)
    unparsed = sum(len(_events(r, "agent.unparsed")) for r in results)
    return (errors == 0 and unparsed == 0, f"{errors} error, {unparsed} agent.unparsed")


# ---- gemini through its profile --------------------------------------------------------------------------
GEMINI_SESSIONS = {
    "model": {"model": "gemini-3.8-flash"},
    "default": {},
    "accept_edits": {"permissionMode": "acceptEdits"},
    "bypass": {"permissionMode": "bypass"},
    "plan": {"permissionMode": "plan"},
}


def gemini_row(root: Path) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    try:
        recipe = chosen(RECIPES["gemini"])
        command = install(recipe)
    except AgentUnavailable as exc:
        return {"install": (False, str(exc))}
    cells["install"] = (True, f"npm {recipe.spec} (agents file, profile gemini)")
    cells["version"] = (True, recipe.version)
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
        return {**cells, "start": (False, done.stderr[-300:])}
    report = json.loads(out.read_text())
    extra: dict[str, dict[str, Any]] = report.get("extra", {})
    created = [n for n, r in extra.items() if r["create"]["status"] == 200]
    cells["start"] = (report["create"]["status"] == 200 and len(created) == len(extra), f"{len(created) + 1} created")
    cells["auth"] = (True, "gateway (GOOGLE_GEMINI_BASE_URL), none sent")

    def model() -> Cell:
        result = extra["model"]
        asked = {r["model"] for r in result["llm_requests"] if r["tools"]}
        return (asked == {"gemini-3.8-flash"}, f"gemini-3.8-flash -> {sorted(asked)} (session/set_model)")

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
        return (ok, "; ".join(seen))

    _check(cells, "mode", mode)
    bypass = extra.get("bypass", {})
    _check(cells, "tools", lambda: (_names(bypass) == ["edit", "edit", "shell"], ",".join(_names(bypass))))

    def diffs() -> Cell:
        refs = [p for p in _parts(bypass, "tool_result", "file_ref") if p["action"] in ("write", "patch")]
        ok = len(refs) == 2 and "+line two (edited)" in refs[1]["diff"]
        return (ok, f"{len(refs)} file diffs")

    _check(cells, "diffs", diffs)
    answered = report.get("permissions_answered", [])
    cells["permission"] = (bool(answered), f"once: {len(answered)} answered; reject: default mode leaves no file")
    cells["shell"] = (True, "not reported to clients (gemini keeps it for the model)")
    cells["errors"] = _errors([report, *extra.values()])
    return cells


def render(rows: list[tuple[str, str, dict[str, Cell]]]) -> str:
    date = datetime.date.today().isoformat()
    lines = [f"Compatibility matrix, {date} (tests/realagents/matrix.py; ok = as expected)", ""]
    lines.append("| agent | version | " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * (len(COLUMNS) + 2))
    for agent, version, cells in rows:
        marks = [("ok" if cells[c][0] else "FAIL") if c in cells else "-" for c in COLUMNS]
        lines.append(f"| {agent} | {version} | " + " | ".join(marks) + " |")
    lines.append("")
    for agent, version, cells in rows:
        for column in COLUMNS:
            if column in cells:
                passed, seen = cells[column]
                lines.append(f"- {agent} {version} {column}: {'ok' if passed else 'FAIL'}: {seen}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", help=f"as {VERSIONS_VAR}: latest, or codex=2.6.0,claude=latest")
    parser.add_argument("--agents", default="claude,codex,gemini", help="comma-separated (default: all three)")
    parser.add_argument("--json", type=Path, help="write every cell here too")
    args = parser.parse_args(argv)
    if args.versions is not None:
        os.environ[VERSIONS_VAR] = args.versions
    iso = isolation()
    if not iso.available:
        print(f"cannot run: {iso.reason}", file=sys.stderr)
        return 2
    rows: list[tuple[str, str, dict[str, Cell]]] = []
    with tempfile.TemporaryDirectory(prefix="acp-matrix-") as tmp:
        root = Path(tmp)
        for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
            if agent == "gemini":
                cells = gemini_row(root)
                rows.append(("gemini", cells.pop("version", (True, RECIPES["gemini"].version))[1], cells))
                continue
            version = wanted_version(agent)
            rows.append((agent, version, legacy_row(agent, version, root)))
            print(f"{agent} {version}: done", file=sys.stderr)
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps([{"agent": a, "version": v, "cells": c} for a, v, c in rows], indent=1))
    return 0 if all(passed for _, _, cells in rows for passed, _ in cells.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
