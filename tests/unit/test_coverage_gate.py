"""The coverage gate is coverage's own ``fail_under`` (``[tool.coverage.report]`` in pyproject.toml),
which ``coverage report`` in .ci/run obeys: a run that covers less of ``app/`` fails the report."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support import ROOT


def test_the_gate_is_fail_under_and_ci_takes_the_report_s_status() -> None:
    gate = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["coverage"]["report"]
    assert gate["fail_under"] >= 90
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "if ! .venv/bin/python -m coverage report" in ci and "COVERAGE_GATE" not in ci


def test_a_run_below_the_gate_fails_the_report(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    coverage = [sys.executable, "-m", "coverage"]
    rcfile = f"--rcfile={ROOT / 'pyproject.toml'}"
    # Not measured by a coverage run this suite may itself be under (.ci/run's).
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    # `acp-rest-bridge --version` runs a sliver of app/.
    run = [*coverage, "run", rcfile, f"--data-file={data}", "-m", "app", "--version"]
    subprocess.run(run, cwd=ROOT, env=env, check=True, capture_output=True)
    subprocess.run([*coverage, "combine", rcfile, "-q", f"--data-file={data}"], cwd=ROOT, env=env, check=True)
    report = subprocess.run(
        [*coverage, "report", rcfile, "--format=total", f"--data-file={data}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert report.returncode == 2, report.stdout + report.stderr
    assert "is less than fail-under=" in report.stdout + report.stderr
