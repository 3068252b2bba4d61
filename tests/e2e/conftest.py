from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.hitl_support import hitl_bridge
from tests.support import PROBES, Bridge, start_bridge

MIB = 1024 * 1024


@dataclass
class Fenced:
    """A bridge whose file access is confined to ``root`` (its working directory), with a 6 MiB body
    limit and the client probe agent. ``outside`` is a directory outside the root."""

    bridge: Bridge
    root: Path
    outside: Path


@pytest.fixture(scope="session")
def hitl_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    """One bridge with the HITL probe agent for the permission and question tests (distinct session ids)."""
    yield from hitl_bridge(tmp_path_factory.mktemp("hitl"))


@pytest.fixture(scope="session")
def fenced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fenced]:
    root = tmp_path_factory.mktemp("fenced")
    outside = tmp_path_factory.mktemp("outside")
    agents = root / "agents.toml"
    agents.write_text(f'[agents.client-probe]\ncommand = ["{sys.executable}", "{PROBES / "client_probe.py"}"]\n')
    server = start_bridge(
        root, "--agents-file", str(agents), "--fs-root", str(root), env={"ACP_BRIDGE_BODY_LIMIT": str(6 * MIB)}
    )
    yield Fenced(server, root, outside)
    server.stop()
