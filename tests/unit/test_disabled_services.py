"""Agents file `disabled_services`: ACP client methods a given agent is not offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.agents.registry import AgentsFileError, load_agents_file
from app.sessions.client_services import ClientMethod, ClientServices


def test_disabled_services_are_read_from_the_agents_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[agents.a]\ncommand = ["a"]\ndisabled_services = ["x/read"]\n[agents.b]\ncommand = ["b"]\n')
    a, b = load_agents_file(path)
    assert a.disabled_services == frozenset({"x/read"})
    assert b.disabled_services == frozenset()
    path.write_text('[agents.a]\ncommand = ["a"]\ndisabled_services = "x/read"\n')
    with pytest.raises(AgentsFileError, match="disabled_services"):
        load_agents_file(path)


async def _handle(session: Any, params: Any, request_id: Any) -> Any:
    return {}


def test_a_disabled_service_is_not_advertised() -> None:
    services = ClientServices(
        [
            ClientMethod("x/read", _handle, capability={"x": {"read": True}}),
            ClientMethod("x/write", _handle, capability={"x": {"write": True}}),
        ]
    )
    assert services.client_capabilities()["x"] == {"read": True, "write": True}
    assert services.client_capabilities(frozenset({"x/read"}))["x"] == {"write": True}


def test_the_bridge_advertises_its_client_methods() -> None:
    assert ClientServices().client_capabilities() == {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "elicitation": {"form": {}},
        "_meta": {"sandbox-agent/requestQuestion": {}},
        "terminal": True,
    }
    caps = ClientServices().client_capabilities(frozenset({"fs/read_text_file", "terminal/create"}))
    assert caps == {
        "fs": {"writeTextFile": True},
        "elicitation": {"form": {}},
        "_meta": {"sandbox-agent/requestQuestion": {}},
    }


def test_terminal_is_advertised_only_with_every_terminal_method() -> None:
    for method in ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release"):
        assert "terminal" not in ClientServices().client_capabilities(frozenset({method}))
    assert ClientServices().client_capabilities(frozenset({"elicitation/create"})).get("elicitation") is None
