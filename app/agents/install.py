"""Installing the ACP adapters that serve the legacy agent ids.

``POST /v1/agents/{agent}/install`` and a session create for a missing agent (legacy §9.3) install the
agent's ACP adapter, an npm package, with ``npm install --prefix`` into its own folder of the install
dir (``<data dir>/bin/<agent>``). npm's own settings apply from the environment (``npm_config_registry``,
a proxy, the cache...).

An install is made in a staging folder and moved into place only once npm has succeeded and the
adapter's program is there, so a failed, timed-out or interrupted install leaves the previous one
(or none) as it was. One install per agent runs at a time; callers that ask meanwhile wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import secrets
import shutil
import signal
import sys
from pathlib import Path

from app.errors import InstallFailed

from .profiles import LEGACY_IDS, PROFILES, NpmAdapter

STDERR_TAIL = 4000


# The npm package of each legacy agent that has one (its profile, app/agents/profiles.py).
ADAPTERS: dict[str, NpmAdapter] = {i: npm for i in LEGACY_IDS if (npm := PROFILES[i].npm) is not None}


def npm_platform() -> str:
    """The platform suffix of npm's native packages (``linux-x64``, ``darwin-arm64``...)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{sys.platform.removesuffix('2')}-{arch}"


def _command_in(folder: Path, adapter: NpmAdapter) -> list[str] | None:
    modules = folder / "node_modules"
    candidates = []
    if adapter.native is not None:
        candidates.append(modules / adapter.native.format(platform=npm_platform()))
    candidates.append(modules / ".bin" / adapter.bin)
    for program in candidates:
        if os.access(program, os.X_OK) and program.is_file():
            return [str(program), *adapter.args]
    return None


def installed_command(install_dir: Path | None, agent_id: str) -> list[str] | None:
    """The command of an adapter installed in the install dir, if there is one."""
    adapter = ADAPTERS.get(agent_id)
    if install_dir is None or adapter is None:
        return None
    return _command_in(install_dir / agent_id, adapter)


def installed_version(install_dir: Path | None, agent_id: str) -> str | None:
    adapter = ADAPTERS.get(agent_id)
    if install_dir is None or adapter is None:
        return None
    manifest = install_dir / agent_id / "node_modules" / adapter.package / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


class Installer:
    def __init__(self, install_dir: Path, timeout: float) -> None:
        self.install_dir = install_dir
        self.timeout = timeout
        self._locks: dict[str, asyncio.Lock] = {}

    def can_install(self, agent_id: str) -> bool:
        return agent_id in ADAPTERS

    async def install(self, agent_id: str, version: str | None = None, *, reinstall: bool = False) -> None:
        adapter = ADAPTERS.get(agent_id)
        if adapter is None:
            raise InstallFailed(agent_id, f"no installer for {agent_id}: put its ACP adapter on PATH")
        lock = self._locks.setdefault(agent_id, asyncio.Lock())
        async with lock:
            if not reinstall and installed_command(self.install_dir, agent_id) is not None:
                return  # installed while this call waited for another
            await self._install(agent_id, adapter, version or adapter.version)

    async def _install(self, agent_id: str, adapter: NpmAdapter, version: str) -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise InstallFailed(agent_id, "npm is not on PATH: the ACP adapters are npm packages (install Node.js)")
        token = secrets.token_hex(4)
        staging = self.install_dir / f".{agent_id}.staging-{token}"
        try:
            await asyncio.to_thread(self._prepare, agent_id, staging)
            spec = f"{adapter.package}@{version}"
            argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), spec]
            if not adapter.run_scripts:
                argv.insert(2, "--ignore-scripts")
            await self._run_npm(agent_id, argv, spec)
            if _command_in(staging, adapter) is None:
                raise InstallFailed(agent_id, f"npm installed {spec}, but it has no program {adapter.bin!r}")
            await asyncio.to_thread(self._swap_in, agent_id, staging, token)
        except OSError as exc:
            raise InstallFailed(agent_id, f"{type(exc).__name__}: {exc}") from exc
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, True)

    def _prepare(self, agent_id: str, staging: Path) -> None:
        self.install_dir.mkdir(parents=True, exist_ok=True)
        # What an interrupted install left behind (this server holds the data dir's lock).
        for leftover in self.install_dir.glob(f".{agent_id}.*-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging.mkdir()

    def _swap_in(self, agent_id: str, staging: Path, token: str) -> None:
        target = self.install_dir / agent_id
        old = self.install_dir / f".{agent_id}.old-{token}"
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    async def _run_npm(self, agent_id: str, argv: list[str], spec: str) -> None:
        env = {**os.environ, "npm_config_update_notifier": "false"}
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,  # npm and its scripts are stopped as a group
        )
        try:
            async with asyncio.timeout(self.timeout or None):
                output, _ = await proc.communicate()
        except BaseException as exc:  # timed out, or the server is stopping
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, TimeoutError):
                raise InstallFailed(agent_id, f"npm install {spec} did not finish in {self.timeout:g}s") from None
            raise
        if proc.returncode != 0:
            text = output.decode("utf-8", "replace")[-STDERR_TAIL:]
            raise InstallFailed(agent_id, f"npm install {spec} failed (exit {proc.returncode}):\n{text}")
