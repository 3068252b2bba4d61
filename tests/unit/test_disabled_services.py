"""Agents file `disabled_services`: ACP client methods a given agent is not offered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.agents.registry import AgentsFileError, load_agents_file
from app.sessions import services


@pytest.fixture
def two_services() -> Iterator[None]:
    async def handle(session: Any, params: Any, request_id: Any) -> Any:
        return {}

    added = {
        "x/read": services.ClientService("x/read", handle, capability={"x": {"read": True}}),
        "x/write": services.ClientService("x/write", handle, capability={"x": {"write": True}}),
    }
    saved = dict(services.SERVICES)
    services.SERVICES.update(added)
    yield
    services.SERVICES.clear()
    services.SERVICES.update(saved)


def test_disabled_services_are_read_from_the_agents_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[agents.a]\ncommand = ["a"]\ndisabled_services = ["x/read"]\n[agents.b]\ncommand = ["b"]\n')
    a, b = load_agents_file(path)
    assert a.disabled_services == frozenset({"x/read"})
    assert b.disabled_services == frozenset()
    path.write_text('[agents.a]\ncommand = ["a"]\ndisabled_services = "x/read"\n')
    with pytest.raises(AgentsFileError, match="disabled_services"):
        load_agents_file(path)


@pytest.mark.usefixtures("two_services")
def test_a_disabled_service_is_not_advertised(tmp_path: Path) -> None:
    assert services.client_capabilities()["x"] == {"read": True, "write": True}
    assert services.client_capabilities(frozenset({"x/read"}))["x"] == {"write": True}
