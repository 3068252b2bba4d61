"""Re-record the golden transcripts of real agents: ``tests/golden/transcripts/<agent>.jsonl``.

Each agent runs through the bridge (with ``ACP_BRIDGE_TRANSCRIPT_DIR`` on) inside a loopback-only
network namespace against the fake LLM, doing three turns:

1. the scripted work: think, plan, write, edit, read, shell (+ a mutating shell command, which
   makes every agent ask permission; permissions are answered "once" when the bridge can);
2. a plain text answer;
3. a slow streaming answer, during which the session is terminated (``session/cancel``).

The wire transcript is then made stable: the temp folder becomes ``<ROOT>`` and the agent's own
session id ``<SESSION_ID>``. Run from the repository root::

    .venv/bin/python -m tests.realagents.record            # every agent
    .venv/bin/python -m tests.realagents.record gemini     # one
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tests.realagents.agents import RECIPES, AgentUnavailable, install
from tests.realagents.netns import ROOT, isolation, run_isolated

GOLDEN = ROOT / "tests" / "golden" / "transcripts"
SCENARIO = "think,plan,write,edit,read,shell,touch"
PROMPTS = [
    f"[scenario:{SCENARIO} dir={{dir}}] Follow the scripted steps.",
    "Just say hi. [scenario:text]",
]


def replace_strings(value: Any, replacements: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [replace_strings(v, replacements) for v in value]
    if isinstance(value, dict):
        return {replace_strings(k, replacements): replace_strings(v, replacements) for k, v in value.items()}
    return value


def tool_call_ids(value: Any, found: list[str]) -> list[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "toolCallId" and isinstance(item, str) and item not in found:
                found.append(item)
            else:
                tool_call_ids(item, found)
    elif isinstance(value, list):
        for item in value:
            tool_call_ids(item, found)
    return found


def normalise(lines: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    native_ids = {
        line["msg"]["result"]["sessionId"]
        for line in lines
        if isinstance(line["msg"].get("result"), dict) and isinstance(line["msg"]["result"].get("sessionId"), str)
    }
    replacements = [(str(root), "<ROOT>")]
    if str(root.resolve()) != str(root):
        replacements.append((str(root.resolve()), "<ROOT>"))
    replacements += [(native, "<SESSION_ID>") for native in sorted(native_ids)]
    # Some agents put the clock in tool call ids (gemini: name_<epoch ms>_<n>): keep the shape, drop the time.
    stamps: dict[str, str] = {}
    for call_id in tool_call_ids([line["msg"] for line in lines], []):
        stable = re.sub(r"\d{13}", lambda m: stamps.setdefault(m.group(), str(1700000000000 + len(stamps))), call_id)
        if stable != call_id:
            replacements.append((call_id, stable))
    return [replace_strings(line, replacements) for line in lines]


def record(agent: str, keep: bool = False) -> Path:
    recipe = RECIPES[agent]
    command = install(recipe)
    root = Path(tempfile.mkdtemp(prefix=f"acp-record-{agent}-")).resolve()
    try:
        argv = [sys.executable, "-m", "tests.realagents.driver", "--agent", agent, "--agent-command"]
        argv += [json.dumps(command), "--root", str(root), "--slow-end", "--out", str(root / "report.json")]
        for prompt in PROMPTS:
            argv += ["--prompt", prompt]
        done = run_isolated(argv, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"driver failed for {agent}:\n{done.stderr[-4000:]}")
        report = json.loads((root / "report.json").read_text())
        if "failure" in report:
            raise RuntimeError(f"{agent}: {report['failure']}\n{report.get('bridge_log_tail', '')}")
        files = sorted((root / "transcripts").glob("*.jsonl"))
        if len(files) != 1:
            raise RuntimeError(f"{agent}: expected one transcript, found {files}")
        lines = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]
        lines = normalise(lines, root)
        GOLDEN.mkdir(parents=True, exist_ok=True)
        target = GOLDEN / f"{agent}.jsonl"
        with target.open("w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        summarise(agent, lines, report)
        return target
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def summarise(agent: str, lines: list[dict[str, Any]], report: dict[str, Any]) -> None:
    methods: Counter[str] = Counter()
    updates: Counter[str] = Counter()
    for line in lines:
        msg = line["msg"]
        if msg.get("method") == "session/update":
            updates[msg["params"]["update"].get("sessionUpdate", "?")] += 1
        elif "method" in msg:
            methods[f"{line['dir']} {msg['method']}"] += 1
    print(f"{agent}: {len(lines)} messages; permissions via {report.get('permission_path')}")
    print("  requests/notifications:", dict(methods))
    print("  session/update kinds:  ", dict(updates))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", nargs="*", help=f"some of {', '.join(sorted(RECIPES))} (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folders")
    args = parser.parse_args(argv)
    unknown = set(args.agents) - set(RECIPES)
    if unknown:
        parser.error(f"unknown agents: {', '.join(sorted(unknown))}")
    iso = isolation()
    if not iso.available:
        sys.exit(iso.reason)
    failed = []
    for agent in args.agents or sorted(RECIPES):
        try:
            print("wrote", record(agent, args.keep))
        except (AgentUnavailable, RuntimeError) as exc:
            failed.append(agent)
            print(f"{agent}: {exc}", file=sys.stderr)
    if failed:
        sys.exit(f"not recorded: {', '.join(failed)}")


if __name__ == "__main__":
    main()
