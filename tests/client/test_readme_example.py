"""README's Python client example, run as it is written there against a spawned server and the mock
agent; and the client's generated reference is current."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python client") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README's Python client section has no example"
    return match.group(1)


def test_readme_example_runs_verbatim(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example())
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
    lines = result.stdout.splitlines()
    assert lines[0] == "Hello from the mock agent"
    assert lines[1] == "allowed: command_execution"
    assert "notes.txt" in lines[2] and "'truncated': False" in lines[2]
    assert (tmp_path / "uploaded" / "notes.txt").read_text() == "hello\n"


def test_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "clients" / "python" / "generate_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
