from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import tiers
from tests.postgres import PostgresServer, remove_postgres, start_postgres
from tests.realagents.netns import Isolation, isolation, opted_out, unavailable
from tests.support import SHARED, SHARED_MISSING, Bridge, require_npm, start_bridge
from tests.tiers import tier_fixture

# pytester: the tiers' own tests run pytest on modules they write (tests/unit/test_tiers.py).
pytest_plugins = ("pytester",)


def pytest_configure(config: pytest.Config) -> None:
    # Test tiers: markers from the real parts a test uses (its fixtures), checked at collection and as
    # it runs (tests/tiers.py). The fast tier is tiers.FAST.
    config.pluginmanager.register(tiers, "tiers")


# Tests reach only loopback: the bridges they start list the ACP registry's snapshot and never fetch
# the published catalog (the catalog tests point the URL at a local server).
os.environ["ACP_BRIDGE_ACP_REGISTRY_URL"] = ""
# and no package index but through the `pypi` fixture (tests/tiers.py: NO_PYPI).
for _name in tiers.PYPI_VARIABLES:
    os.environ[_name] = tiers.NO_PYPI


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


@tier_fixture("postgres", scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the session's tests (each test takes its own database)."""
    server = start_postgres()
    yield server
    remove_postgres(server)


@tier_fixture("postgres")
def database_url(postgres: PostgresServer) -> str:
    """A fresh, empty database on the test PostgreSQL server."""
    return postgres.new_database()


@tier_fixture("npm", scope="session")
def npm() -> None:
    """Node.js and npm on PATH (installed by the suite where missing: tests/support.py require_npm)."""
    require_npm()


@tier_fixture("network")
def pypi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package index this machine is configured with, for this test and the processes it starts
    (every other test gets one that refuses)."""
    for name, value in tiers.PYPI_ENV.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


@tier_fixture("realagents", scope="session")
def netns() -> Isolation:
    """A loopback-only network namespace for real agents and the fake LLM (fails in CI when there is
    none; skips elsewhere, and with ACP_BRIDGE_TEST_REAL_AGENTS=0)."""
    opted_out()
    found = isolation()
    if not found.available:
        unavailable(found.reason)
    return found


@tier_fixture("docker")
def docker() -> None:
    """The Docker smoke test runs from .ci/run (it takes minutes); ACP_BRIDGE_TEST_DOCKER=1 runs it
    from the suite too (root, Debian)."""
    if os.environ.get("ACP_BRIDGE_TEST_DOCKER") != "1":
        pytest.skip("the Docker smoke test runs from .ci/run; ACP_BRIDGE_TEST_DOCKER=1 runs it here too")
