"""The server starts without the SDK's schema models, and `acp` still works in full for others."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT

SCRIPT = """
import sys
import app.main
assert "acp.schema" not in sys.modules, "the schema models were loaded"
import acp
from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import ReadTextFileRequest
assert PROTOCOL_VERSION == 1 and callable(spawn_agent_process) and "acp.schema" in sys.modules
print("ok")
"""


def test_schema_models_load_only_when_asked_for() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
