from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.postgres import PostgresServer, remove_postgres, start_postgres
from tests.support import ROOT, SHARED, SHARED_MISSING, Bridge, start_bridge

# Test tiers as markers (registered in pyproject.toml, --strict-markers): what a module needs beyond
# Python and the project. A module may also mark itself with `pytestmark`. The fast tier is
# `-m "not (realagents or browser or docker or npm or postgres or network)"`.
TIERS: dict[str, tuple[str, ...]] = {
    "browser": ("tests/browser/",),
    "docker": ("tests/docker/",),
    "realagents": (
        "tests/e2e/test_real_agents.py",
        "tests/e2e/test_legacy_agents.py",
        "tests/e2e/test_realagent_restart.py",
    ),
    "npm": (
        "tests/e2e/test_install.py",
        "tests/e2e/test_install_failfast.py",
        "tests/e2e/test_node_on_demand.py",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
        for marker, prefixes in TIERS.items():
            if where.startswith(prefixes):
                item.add_marker(marker)


# Tests reach only loopback: the bridges they start list the ACP registry's snapshot and never fetch
# the published catalog (the catalog tests point the URL at a local server).
os.environ["ACP_BRIDGE_ACP_REGISTRY_URL"] = ""


@pytest.fixture(scope="session")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    """One shared bridge (no token) for tests that need no special configuration."""
    tmp = tmp_path_factory.mktemp("bridge")
    server = start_bridge(tmp)
    yield server
    server.stop()


@pytest.fixture
def client(bridge: Bridge) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=bridge.url, timeout=20.0) as c:
        yield c


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    return SHARED


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the session's tests (each test takes its own database)."""
    server = start_postgres()
    yield server
    remove_postgres(server)


@pytest.fixture
def database_url(postgres: PostgresServer) -> str:
    """A fresh, empty database on the test PostgreSQL server."""
    return postgres.new_database()
