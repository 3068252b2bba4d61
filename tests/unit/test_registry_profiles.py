"""Agents of the ACP registry get the profile their package or program names; credentialsAvailable
follows what an agent declares; an npm agent that needs a newer Node.js runs with the bridge's own."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from app.agents.acp_catalog import BinaryTarget, CatalogAgent, PackageDistribution, load_snapshot
from app.agents.catalog_install import installed_manifest
from app.agents.profiles import GENERIC, PROFILES, profile_for_catalog
from app.agents.registry import AgentRegistry, AgentSpec


def test_the_snapshots_agents_get_the_profiles_the_bridge_has() -> None:
    found = {a.id: profile_for_catalog(a.package_names(), a.program_names()).id for a in load_snapshot().agents}
    assert found["gemini"] == "gemini" and found["qwen-code"] == "qwen" and found["claude-code-acp"] == "claude"
    assert found["codex-acp"] == "codex" and found["opencode"] == "opencode"  # by their programs
    assert found["auggie"] == "generic"


def test_packages_and_programs_are_read_without_versions_or_folders() -> None:
    agent = CatalogAgent(
        "x",
        "X",
        "1.0.0",
        npx=PackageDistribution("@agentclientprotocol/claude-agent-acp@0.101.0"),
        uvx=PackageDistribution("some-agent==1.2"),
        binary={"linux-x86_64": BinaryTarget("https://e/x.tgz", "./dist/codex-acp.exe")},
    )
    assert agent.package_names() == ("@agentclientprotocol/claude-agent-acp", "some-agent")
    assert agent.program_names() == ("codex-acp",)
    assert profile_for_catalog(agent.package_names(), ()).id == "claude"
    assert profile_for_catalog((), ("nothing-known",)) is GENERIC


def test_a_registry_agent_runs_with_its_profile_and_its_workarounds(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.agents.acp_catalog import CatalogSource

    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    registry = AgentRegistry(catalog=CatalogSource(None))
    gemini = registry.get("gemini")
    assert gemini.profile is PROFILES["gemini"] and "fs/read_text_file" in gemini.disabled_services
    assert gemini.credentials_available() is False  # its profile's variables: none set
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert gemini.credentials_available() is True
    assert registry.get("auggie").profile is GENERIC


def test_credentials_of_an_agent_without_a_profile_are_what_it_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROBE_KEY", raising=False)
    entry = CatalogAgent("probe", "Probe", "1.0.0", npx=PackageDistribution("probe-agent@1.0.0"))
    spec = AgentSpec("probe", None, catalog_entry=entry)
    assert spec.credentials_available() is False  # never started: it told nothing
    spec.auth_methods = [{"id": "key", "type": "env_var", "vars": [{"name": "PROBE_KEY"}]}]
    assert spec.credentials_available() is False
    monkeypatch.setenv("PROBE_KEY", "k")
    assert spec.credentials_available() is True
    spec.auth_methods = []  # it asks for nothing
    assert spec.credentials_available() is True
    spec.auth_methods = [{"id": "login", "name": "Log in"}]  # a method the bridge cannot check
    spec.started_with_credentials = False  # ... and it refused a session for lack of them
    assert spec.credentials_available() is False
    agents_file = AgentSpec("mine", ["x"])  # the user's own entry: the server's env is its business
    assert agents_file.credentials_available() is True


def test_an_npm_agent_that_needs_a_newer_node_runs_with_the_bridges(tmp_path: Path) -> None:
    program = tmp_path / "node_modules" / ".bin" / "agent"
    program.parent.mkdir(parents=True)
    program.write_text("#!/usr/bin/env node\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    manifest = {"id": "a", "command": ["node_modules/.bin/agent", "--acp"], "node": str(node)}
    (tmp_path / ".acp-registry.json").write_text(json.dumps(manifest))
    installed = installed_manifest(tmp_path)
    assert installed is not None and installed["command"] == [str(node), str(program), "--acp"]
    os.remove(node)  # gone: the system's Node.js then
    installed = installed_manifest(tmp_path)
    assert installed is not None and installed["command"] == [str(program), "--acp"]
