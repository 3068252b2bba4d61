from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import SHARED, SHARED_MISSING, Bridge, start_bridge


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
