"""The mock's `help` lists every command it knows."""

from __future__ import annotations

import re

from app.agents.mock.commands import COMMANDS
from app.agents.mock.script import HELP_TEXT


def test_help_lists_every_command() -> None:
    listed = set(re.findall(r"[\w.]+", " ".join(line for line in HELP_TEXT.splitlines() if line.startswith("- "))))
    missing = sorted(name for name in COMMANDS if name not in listed)
    assert not missing, f"commands missing from the mock's help: {missing}"
    for name in ("plan", "diff", "v2", "read", "write", "run", "spawn"):
        assert f"- {name}" in HELP_TEXT
