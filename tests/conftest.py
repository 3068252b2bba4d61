from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import SHARED, Bridge, start_bridge

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
        pytest.skip("../shared is not present")
    return SHARED
