"""docs/fleets.md's two bridges on one machine, run as written on a database of the test PostgreSQL
server: its ports, its database URL and the install line (done by README's set-up) are the only
changes. The session is made on one bridge and its turn streamed through the other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import all_blocks, expected_pattern
from tests.support import ROOT, free_port

DOCUMENTED_URL = "postgresql://bridge@127.0.0.1/bridge"
INSTALL = ".venv/bin/pip install -q -c constraints.txt -e '.[postgres]'"


def test_two_bridges_on_one_database_as_the_fleet_page_writes_them(database_url: str, tmp_path: Path) -> None:
    (block,) = [b for b in all_blocks() if b.tested_by == "tests/docs/test_fleet_recipe.py"]
    assert block.document.name == "fleets.md" and DOCUMENTED_URL in block.code and INSTALL in block.code
    a, b = free_port(), free_port()
    code = block.code.replace(INSTALL, "").replace(DOCUMENTED_URL, database_url)
    code = code.replace(":2468", f":{a}").replace(":2469", f":{b}").replace("2468 ", f"{a} ").replace("2469 ", f"{b} ")
    assert "2468" not in code and "2469" not in code, code
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    # The reader stops the two bridges with Ctrl-C; here they get SIGTERM and must exit 0.
    script = code + 'for pid in $(jobs -p); do kill "$pid"; wait "$pid" || echo "bridge exited $?"; done\n'
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "bridge exited" not in done.stdout, done.stdout + done.stderr
    for expected in block.expected():
        printed = expected_pattern(expected).search(done.stdout)
        assert printed, f"{expected!r} not printed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "data-a").is_dir() and (tmp_path / "data-b").is_dir()
