"""Do the diffs a session showed apply? Every ``file_ref`` diff of its tool results, in event order,
is checked with ``git apply --check`` and ``patch --dry-run`` against a scratch copy of the files as
they were at that point, starting from none (the scenarios start in an empty directory); a diff of a
completed tool call is then applied, so the next one is checked against the file it changed. At the
end the scratch copy must equal the files the session left.

    python -m tests.realagents.diffcheck report.json    # a driver's report: prints the findings
    python -m tests.realagents.diffcheck --agent claude --version 0.23.1 --sessions 20

The second form installs the agent (``POST /v1/agents/{agent}/install``), runs that many sessions of
``write,edit,rewrite`` (a new file written, edited, written again) through the legacy API against
the fake LLM in a loopback-only namespace (half asking, every permission answered ``once``, half in
``acceptEdits``), checks every diff of every session and prints the figures.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class DiffCheck:
    diffs: int = 0  # file_ref diffs checked
    applied: int = 0  # ... that git apply and patch both accepted
    missing: int = 0  # write/patch file_refs without a diff (the agent sent none, or it could not be exact)
    unchecked: int = 0  # diffs of a file a diff-less change had changed before: nothing to check against
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.applied == self.diffs

    def summary(self) -> str:
        text = f"{self.applied}/{self.diffs} diffs apply"
        if self.missing:
            text += f", {self.missing} without a diff"
        if self.unchecked:
            text += f", {self.unchecked} unchecked"
        return text + (f"; {len(self.problems)} problems" if self.problems else "")


def tool_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The completed tool_result items, in event order."""
    return [
        e["data"]["item"]
        for e in events
        if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "tool_result"
    ]


def _run(argv: list[str], cwd: Path, diff: str) -> str | None:
    done = subprocess.run(argv, cwd=cwd, input=diff, capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()[-400:]


def applied(diff: str, before: str | None, path: str) -> str | None:
    """The file ``diff`` makes of ``before`` (None: no such file) at ``path``, with ``git apply``;
    None when it does not apply."""
    with tempfile.TemporaryDirectory(prefix="diffcheck-") as tmp:
        copy = Path(tmp) / path.lstrip("/")
        if before is not None:
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(before)
        if _run(["git", "apply", "-"], Path(tmp), diff) is not None:
            return None
        return copy.read_text() if copy.exists() else None


def check_events(events: list[dict[str, Any]], files: dict[str, str] | None = None) -> DiffCheck:
    """Check every diff of ``events``; ``files``: absolute path -> text the session left, compared
    with the scratch copy once every diff is applied."""
    check = DiffCheck()
    scratch = Path(tempfile.mkdtemp(prefix="diffcheck-"))
    touched: set[str] = set()
    unknown: set[str] = set()  # changed without a diff: the scratch copy no longer follows them
    try:
        for item in tool_results(events):
            for part in item["content"]:
                if part.get("type") != "file_ref" or part.get("action") not in ("write", "patch"):
                    continue
                diff = part.get("diff")
                if diff is None:
                    check.missing += 1
                    if item["status"] == "completed":
                        unknown.add(part["path"])
                    continue
                if not diff:
                    continue  # no change
                if part["path"] in unknown:
                    check.unchecked += 1
                    continue
                check.diffs += 1
                where = f"{part['path']} ({item['native_item_id']})"
                if "[diff truncated at " in diff:
                    check.problems.append(f"{where}: truncated")
                    continue
                failed = _run(["git", "apply", "--check", "-"], scratch, diff)
                failed = failed or _run(["patch", "--dry-run", "-s", "-p1", "-f"], scratch, diff)
                if failed:
                    check.problems.append(f"{where}: does not apply: {failed}\n{diff}")
                    continue
                check.applied += 1
                if item["status"] == "completed":
                    applied = _run(["git", "apply", "-"], scratch, diff)
                    if applied:
                        check.problems.append(f"{where}: git apply failed after --check: {applied}")
                    touched.add(part["path"])
        for path in sorted(touched - unknown) if files is not None else ():
            copy = scratch / path.lstrip("/")
            left = files.get(path) if files is not None else None
            mine = copy.read_text() if copy.exists() else None
            if mine != left:
                check.problems.append(f"{path}: the diffs give {mine!r}, the session left {left!r}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return check


def check_report(report: dict[str, Any]) -> dict[str, DiffCheck]:
    """Each case of a driver's report, checked with the files it left."""
    checks: dict[str, DiffCheck] = {}
    for name, result in report.get("cases", {}).items():
        if result.get("create", {}).get("status") != 200:
            continue
        directory = (result.get("info") or {}).get("directory", "")
        files = {f"{directory}/{k}": v for k, v in result.get("files", {}).items()}
        checks[name] = check_events(result.get("events", []), files)
    return checks


def run_sessions(agent: str, version: str | None, sessions: int, steps: str) -> dict[str, Any]:
    """``sessions`` sessions of ``steps`` through the legacy driver, in the namespace: its report."""
    from tests.realagents.legacy import install_outside, wanted_version
    from tests.realagents.netns import run_isolated

    version = version or wanted_version(agent)
    installed = install_outside(agent, version)
    if installed["status"] != 204:
        raise SystemExit(f"{agent} {version} could not be installed: {installed['body'][-1500:]}")
    with tempfile.TemporaryDirectory(prefix="diffcheck-run-") as tmp:
        out = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "tests.realagents.diffcheck", "--drive", agent, "--version", version]
        argv += ["--sessions", str(sessions), "--steps", steps, "--out", str(out)]
        done = run_isolated(argv, timeout=60.0 * sessions + 300)
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"the driver failed ({done.returncode}):\n{done.stderr[-3000:]}")
        report: dict[str, Any] = json.loads(out.read_text())
    return report


def drive(agent: str, version: str, sessions: int, steps: str, out: Path) -> None:
    """Inside the namespace: the legacy driver with ``sessions`` cases of ``steps``."""
    from tests.realagents.legacy import AGENTS, Case, Driver, LegacyAgent
    from tests.realagents.netns import run_driver

    base = AGENTS[agent]
    cases = tuple(
        Case(f"s{n:02d}", {} if n % 2 else {"permissionMode": "acceptEdits"}, steps) for n in range(1, sessions + 1)
    )
    runs = LegacyAgent(base.id, base.env, base.key, cases, registry=base.registry, tested=base.tested)

    def execute(root: Path) -> dict[str, Any]:
        return Driver(runs, root, version, keyless=False).execute()

    run_driver(f"diffcheck-{agent}-", execute, out, keep=False)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("report", nargs="?", type=Path, help="a driver's JSON report to check")
    parser.add_argument("--agent", help="run sessions of this agent (a legacy or registry id of legacy.py)")
    parser.add_argument("--drive", help=argparse.SUPPRESS)  # the run inside the namespace
    parser.add_argument("--version", help="its version (default: the tested one)")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--steps", default="write,edit,rewrite")
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        assert args.out is not None and args.version is not None
        drive(args.drive, args.version, args.sessions, args.steps, args.out)
        return 0
    if args.agent:
        report = run_sessions(args.agent, args.version, args.sessions, args.steps)
        if "failure" in report:
            print(f"the run failed: {report['failure']}")
            return 1
    elif args.report:
        report = json.loads(args.report.read_text())
    else:
        parser.error("a report, or --agent")
    checks = check_report(report)
    for name, check in checks.items():
        print(f"{name}: {check.summary()}")
        for problem in check.problems:
            print("  " + problem.replace("\n", "\n  "))
    good = [c for c in checks.values() if c.ok and not c.missing]
    total = sum(c.diffs for c in checks.values())
    who = f"{report.get('agent')} {report.get('version')}"
    print(f"{who}: {len(good)} of {len(checks)} sessions have every diff there and applying ({total} diffs)")
    return 0 if checks and len(good) == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
