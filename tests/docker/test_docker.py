"""The Docker image builds and serves a mock session, and the fleet's compose file runs. `.ci/run` runs
both scripts itself (they take minutes); ACP_BRIDGE_TEST_DOCKER=1 runs them from the suite too (root,
Debian)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SMOKE = Path(__file__).with_name("smoke.sh")
FLEET = Path(__file__).with_name("fleet.sh")


@pytest.mark.usefixtures("docker")  # (skips unless ACP_BRIDGE_TEST_DOCKER=1)
def test_docker_image_smoke() -> None:
    result = subprocess.run(["bash", str(SMOKE)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed, 0 failed" in result.stdout and "NOTICE" not in result.stdout


@pytest.mark.usefixtures("docker")  # (skips unless ACP_BRIDGE_TEST_DOCKER=1)
def test_the_fleet_compose_file() -> None:
    result = subprocess.run(["bash", str(FLEET)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed, 0 failed" in result.stdout and "NOTICE" not in result.stdout
