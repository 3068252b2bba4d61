"""The runnable code blocks of README.md and the docs site, run as a reader would run them, in page
order, against one real server (``localhost:2468`` in a block is that server's address): each must
print what its ``# -> `` comments show. They run in a directory of their own, with the venv as
``.venv`` and the Python client importable, as in a clone after README's set-up."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import Block, all_blocks, expected_pattern
from tests.support import ROOT, Bridge, start_bridge

RUNNABLE = [block for block in all_blocks() if block.kind == "run"]
DOCUMENTED = ("localhost:2468", "127.0.0.1:2468")


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("docs-bridge"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the blocks run: a directory with the venv as ``.venv``, as a clone has it."""
    folder = tmp_path_factory.mktemp("docs-clone")
    (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return folder


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
def test_the_block_runs_and_prints_what_it_shows(block: Block, bridge: Bridge, clone: Path) -> None:
    address = bridge.url.removeprefix("http://")
    code = block.code
    for documented in DOCUMENTED:
        code = code.replace(documented, address)
    env = {
        **os.environ,
        "HOME": str(clone),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "clients" / "python" / "src"), str(ROOT)]),
    }
    argv = ["bash", "-c", code] if block.language == "sh" else [sys.executable, "-c", code]
    done = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    for expected in block.expected():
        # Searched in what was printed: curl prints no newline after a JSON answer, so the next
        # command's output may follow on the same line, as in a terminal.
        assert expected_pattern(expected).search(done.stdout), (
            f"{block.name}: no line printed matches {expected!r}\nstdout:\n{done.stdout[-3000:]}\n"
            f"stderr:\n{done.stderr[-3000:]}"
        )
    if block.language == "python":
        assert done.returncode == 0, done.stderr
