from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.postgres import PostgresServer, remove_postgres, start_postgres
from tests.support import SHARED, Bridge, start_bridge


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
        pytest.skip("../shared is not present")
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
