"""Do the diffs a session showed apply? Every ``file_ref`` diff of its tool results, in event order,
is checked with ``git apply --check`` and ``patch --dry-run`` against a scratch copy of the files as
they were at that point, starting from none (the scenarios start in an empty directory); a diff of a
completed tool call is then applied, so the next one is checked against the file it changed. At the
end the scratch copy must equal the files the session left.

    python -m tests.realagents.diffcheck report.json    # a driver's report: prints the findings
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


def main(argv: list[str]) -> int:
    report = json.loads(Path(argv[0]).read_text())
    results = report.get("cases", {"session": report})
    failed = False
    for name, result in results.items():
        check = check_events(result.get("events", []))
        print(f"{name}: {check.summary()}")
        for problem in check.problems:
            print("  " + problem.replace("\n", "\n  "))
        failed |= not check.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
