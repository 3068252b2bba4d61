"""The Python client examples of docs/python-client.md, run as they are written there against a spawned server and the
mock agent; and the client's generated reference is current."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.client.readme import readme_examples
from tests.support import ROOT


def run(script: Path, tmp_path: Path) -> list[str]:
    env = {
        **os.environ,
        "HOME": str(tmp_path),  # upload-batch puts a relative path under the home directory
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "clients" / "python" / "src"), str(ROOT)]),
    }
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_readme_examples_run_verbatim(tmp_path: Path) -> None:
    sync_example, async_example = readme_examples()[:2]
    (tmp_path / "sync_example.py").write_text(sync_example)
    lines = run(tmp_path / "sync_example.py", tmp_path)
    assert lines[:4] == [
        "Hello from the mock agent",
        "allowed: command_execution",  # the turn went on after the first answer...
        "allowed: command_execution",
        "Answers: allow-once, allow-once",  # ...and after the second, to its end
    ]
    assert "notes.txt" in lines[4] and "'truncated': False" in lines[4]
    assert (tmp_path / "uploaded" / "notes.txt").read_text() == "hello\n"
    (tmp_path / "async_example.py").write_text(async_example)
    assert run(tmp_path / "async_example.py", tmp_path) == ["turn.started turn.ended", "unreachable: ConnectError"]


def test_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "clients" / "python" / "generate_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
