"""Installing the ACP adapters that serve the legacy agent ids.

``POST /v1/agents/{agent}/install`` and a session create for a missing agent (legacy §9.3) install the
agent's ACP adapter, an npm package, with ``npm install --prefix`` into its own folder of the install
dir (``<data dir>/bin/<agent>``). npm's own settings apply from the environment (``npm_config_registry``,
a proxy, the cache...).

The default version is the newest the project has tested (the profile's); any other published one
can be asked for, and versions from before an adapter moved to another npm name come from the old one
(``NpmAdapter.spec``). An adapter whose ``engines.node`` the system's Node.js does not meet is started
with the bridge's own Node.js (``node.py``, recorded in its folder as ``.node``), or its install fails
naming the requirement.

An install is made in a staging folder and moved into place only once npm has succeeded and the
adapter's program is there, so a failed, timed-out or interrupted install leaves the previous one
(or none) as it was. One install per agent runs at a time; callers that ask meanwhile wait for it.
npm's process group and the staging folder are recorded (the server's process registry), so that
the next server ends and removes what a crash left. All of that is ``install_core.InstallCore``,
shared with the ACP registry's installer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from app.errors import InstallFailed

from .install_core import STDERR_TAIL, InstallCore
from .profiles import LEGACY_IDS, PROFILES, NpmAdapter

# Bounded network waits, so that an unreachable registry fails in seconds rather than after
# npm's own minutes of retries. Applied only where the environment sets nothing.
NPM_DEFAULTS = {
    "npm_config_fetch_retries": "1",
    "npm_config_fetch_retry_mintimeout": "1000",
    "npm_config_fetch_retry_maxtimeout": "5000",
    "npm_config_fetch_timeout": "20000",
    "npm_config_loglevel": "http",  # one line per fetch: the install's progress in the log
}

log = logging.getLogger("acp_rest_bridge.install")


# The npm package of each legacy agent that has one (its profile, app/agents/profiles.py).
ADAPTERS: dict[str, NpmAdapter] = {i: npm for i in LEGACY_IDS if (npm := PROFILES[i].npm) is not None}


def npm_platform() -> str:
    """The platform suffix of npm's native packages (``linux-x64``, ``darwin-arm64``...)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{sys.platform.removesuffix('2')}-{arch}"


NODE_MARKER = ".node"  # in an agent's folder: the Node.js program it must run with (see Installer)


def _command_in(folder: Path, adapter: NpmAdapter) -> list[str] | None:
    modules = folder / "node_modules"
    candidates = [modules / native.format(platform=npm_platform()) for native in adapter.natives]
    script = modules / ".bin" / adapter.bin
    for program in candidates:
        if os.access(program, os.X_OK) and program.is_file():
            return [str(program), *adapter.args]
    if not (os.access(script, os.X_OK) and script.is_file()):
        return None
    node = _required_node(folder)
    if node is not None:
        return [node, str(script), *adapter.args]
    return [str(script), *adapter.args]


def _required_node(folder: Path) -> str | None:
    """The Node.js an install needs instead of the system's (written by the install), if any."""
    try:
        node = (folder / NODE_MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return node if node and os.access(node, os.X_OK) else None


def installed_command(install_dir: Path | None, agent_id: str) -> list[str] | None:
    """The command of an adapter installed in the install dir, if there is one."""
    adapter = ADAPTERS.get(agent_id)
    if install_dir is None or adapter is None:
        return None
    return _command_in(install_dir / agent_id, adapter)


def _manifest(folder: Path, adapter: NpmAdapter) -> dict[str, Any] | None:
    for package in adapter.packages:
        try:
            data = json.loads((folder / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return None


def installed_version(install_dir: Path | None, agent_id: str) -> str | None:
    adapter = ADAPTERS.get(agent_id)
    if install_dir is None or adapter is None:
        return None
    manifest = _manifest(install_dir / agent_id, adapter)
    version = manifest.get("version") if manifest else None
    return version if isinstance(version, str) else None


def package_version_of(program: str, agent_id: str) -> str | None:
    """The version of the adapter package a program on PATH belongs to (an npm global install:
    ``bin/<name>`` links into ``node_modules/<package>/``), when it can be told."""
    adapter = ADAPTERS.get(agent_id)
    if adapter is None:
        return None
    try:
        path = Path(program).resolve()
    except OSError:
        return None
    for folder in list(path.parents)[:6]:
        try:
            data = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("name") in adapter.packages and isinstance(data.get("version"), str):
            return str(data["version"])
    return None


class Installer:
    """The legacy ids' ACP adapters, on the installer core shared with the ACP registry's agents."""

    def __init__(self, core: InstallCore) -> None:
        self.core = core

    def can_install(self, agent_id: str) -> bool:
        return agent_id in ADAPTERS

    async def install(self, agent_id: str, version: str | None = None, *, reinstall: bool = False) -> None:
        adapter = ADAPTERS.get(agent_id)
        if adapter is None:
            raise InstallFailed(agent_id, f"no installer for {agent_id}: put its ACP adapter on PATH")
        async with self.core.lock(agent_id):
            if not reinstall and installed_command(self.core.install_dir, agent_id) is not None:
                return  # installed while this call waited for another
            await self._install(agent_id, adapter, version or adapter.version)

    async def _install(self, agent_id: str, adapter: NpmAdapter, version: str) -> None:
        core = self.core
        npm = await core.npm(agent_id)
        try:
            async with core.staging(core.install_dir, agent_id) as staging:
                spec = adapter.spec(version)
                argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging.path), spec]
                if not adapter.run_scripts:
                    argv.insert(2, "--ignore-scripts")
                await run_npm(core, agent_id, argv, spec)
                if _command_in(staging.path, adapter) is None:
                    raise InstallFailed(agent_id, f"npm installed {spec}, but it has no program {adapter.bin!r}")
                await self._check_node(agent_id, adapter, staging.path, spec)
                await asyncio.to_thread(core.swap_in, staging, core.install_dir / agent_id)
        except OSError as exc:
            raise InstallFailed(agent_id, f"{type(exc).__name__}: {exc}") from exc

    async def _check_node(self, agent_id: str, adapter: NpmAdapter, staging: Path, spec: str) -> None:
        """An adapter that needs a newer Node.js than the system's runs with the bridge's own (on
        demand, recorded in its folder), or the install fails naming what it needs."""
        manifest = await asyncio.to_thread(_manifest, staging, adapter)
        node = await self.core.node_for(agent_id, manifest, spec)
        if node is not None:
            await asyncio.to_thread((staging / NODE_MARKER).write_text, node + "\n", "utf-8")


async def run_npm(core: InstallCore, agent_id: str, argv: list[str], spec: str) -> None:
    """``npm install`` as a step of an install, its output line by line into the log (the install's
    progress); when it fails, npm's error lines and its output's tail in the error."""
    env = {"npm_config_update_notifier": "false"}
    env.update((key, value) for key, value in NPM_DEFAULTS.items() if key not in os.environ)  # the user's win
    registry = os.environ.get("npm_config_registry", "npm's")
    log.info("installing %s: npm install %s (registry %s)", agent_id, spec, registry)
    started = time.monotonic()

    def progress(line: str) -> None:
        if line:
            log.info("npm (%s): %s", agent_id, line[:500])

    done = await core.run(agent_id, argv, f"npm install {spec}", env=env, on_line=progress, check=False)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        summary = readable_npm_error(done.lines)
        log.warning("install of %s failed after %.1fs (exit %s):\n%s", agent_id, elapsed, done.returncode, summary)
        raise InstallFailed(
            agent_id,
            f"npm install {spec} failed (exit {done.returncode}):\n{summary}\n\nnpm output:\n{done.tail(STDERR_TAIL)}",
        )
    log.info("installed %s (%s) in %.1fs", agent_id, spec, elapsed)


def readable_npm_error(lines: list[str]) -> str:
    """npm's error lines without stack frames, dumped objects and the debug-log pointer: what a
    person needs to read (``code ECONNREFUSED``, ``FetchError: request to ... failed``, hints)."""
    kept: list[str] = []
    depth = 0
    for line in lines:
        for prefix in ("npm error ", "npm ERR! "):
            if line.startswith(prefix) or line == prefix.rstrip():
                text = line[len(prefix) :]
                break
        else:
            continue
        stripped = text.strip()
        if depth:
            depth += stripped.count("{") - stripped.count("}")
            continue
        if stripped.endswith("{"):
            depth = 1
            stripped = stripped[:-1].rstrip()
        if not stripped or stripped.startswith("at ") or stripped.startswith("A complete log of this run"):
            continue
        kept.append(stripped)
    return "\n".join(kept[-20:]) if kept else "\n".join(lines[-20:])
