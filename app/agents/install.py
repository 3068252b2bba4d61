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
npm's process group and the staging folder are recorded (``Recorder``: the server's process
registry), so that the next server ends and removes what a crash left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import platform
import re
import secrets
import shutil
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from app.agents.node import OnDemandNode, node_version
from app.errors import InstallFailed

from .profiles import LEGACY_IDS, PROFILES, NpmAdapter

STDERR_TAIL = 4000
OUTPUT_LINES = 200
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


class Recorder(Protocol):
    """Where a run records its process groups and working directories (``app.acp.orphans``)."""

    @property
    def env(self) -> dict[str, str]: ...
    def started(self, pgid: int) -> None: ...
    def stopped(self, pgid: int) -> None: ...
    def made_dir(self, path: Path) -> None: ...
    def removed_dir(self, path: Path) -> None: ...


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


# ---- Node.js versions --------------------------------------------------------------------------------
_COMPARATOR = re.compile(r"(<=|>=|<|>|=|\^|~)?\s*v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?")


def node_satisfies(version: tuple[int, int, int], wanted: str) -> bool | None:
    """Whether a Node.js version meets an ``engines.node`` range (``>=22``, ``^20.19.0 || >=22.12``);
    None when the range is beyond this simple reading (then it is not enforced)."""
    for alternative in wanted.split("||"):
        alternative = alternative.strip()
        if not alternative or alternative in ("*", "x"):
            return True
        ok = True
        position = 0
        while position < len(alternative):
            if alternative[position].isspace():
                position += 1
                continue
            match = _COMPARATOR.match(alternative, position)
            if match is None or match.end() == position:
                return None
            position = match.end()
            if not _meets(version, match[1] or "=", match[2], match[3], match[4]):
                ok = False
        if ok:
            return True
    return False


def _meets(version: tuple[int, int, int], op: str, *parts: str | None) -> bool:
    numbers = [int(p) for p in parts if p is not None and p.isdigit()]
    given = len(numbers)
    bound = tuple(numbers + [0] * (3 - given))
    if op == "^":  # same major (for 0.x: same minor), at least the bound
        top = (bound[0] + 1, 0, 0) if bound[0] or given == 1 else (0, bound[1] + 1, 0)
        return bound <= version < top
    if op == "~":
        top = (bound[0] + 1, 0, 0) if given == 1 else (bound[0], bound[1] + 1, 0)
        return bound <= version < top
    if op == "=":
        return version[:given] == bound[:given]
    return {">=": version >= bound, ">": version > bound, "<": version < bound, "<=": version <= bound}[op]


class Installer:
    def __init__(
        self, install_dir: Path, timeout: float, node: OnDemandNode | None = None, recorder: Recorder | None = None
    ) -> None:
        self.install_dir = install_dir
        self.timeout = timeout
        self.node = node
        self.recorder = recorder
        self._locks: dict[str, asyncio.Lock] = {}
        # npm processes running now, and installs not yet cleaned up (for a prompt shutdown).
        self._procs: set[asyncio.subprocess.Process] = set()
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Stop every running install: npm's process groups killed, partial installs removed (by
        the installs themselves, whose requests the server cancels; this waits for them)."""
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)

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
        if self.node is not None and (npm is None or Path(npm).parent == self.node.bin_dir):
            # The on-demand Node.js's bin/npm cannot find npm's code: its own entry point can.
            npm = await self.node.npm(agent_id)
        if npm is None:
            raise InstallFailed(agent_id, "npm is not on PATH: the ACP adapters are npm packages (install Node.js)")
        token = secrets.token_hex(4)
        staging = self.install_dir / f".{agent_id}.staging-{token}"
        self._active += 1
        self._idle.clear()
        try:
            await asyncio.to_thread(self._prepare, agent_id, staging)
            spec = adapter.spec(version)
            argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), spec]
            if not adapter.run_scripts:
                argv.insert(2, "--ignore-scripts")
            await self._run_npm(agent_id, argv, spec)
            if _command_in(staging, adapter) is None:
                raise InstallFailed(agent_id, f"npm installed {spec}, but it has no program {adapter.bin!r}")
            await self._check_node(agent_id, adapter, staging, spec)
            await asyncio.to_thread(self._swap_in, agent_id, staging, token)
        except OSError as exc:
            raise InstallFailed(agent_id, f"{type(exc).__name__}: {exc}") from exc
        finally:
            try:
                # Shielded: a second cancellation (the server's last sweep) must not stop the clean-up.
                await asyncio.shield(asyncio.to_thread(shutil.rmtree, staging, True))
                if self.recorder is not None:
                    self.recorder.removed_dir(staging)
            finally:
                self._active -= 1
                if not self._active:
                    self._idle.set()

    async def _check_node(self, agent_id: str, adapter: NpmAdapter, staging: Path, spec: str) -> None:
        """An adapter that needs a newer Node.js than the system's runs with the bridge's own (on
        demand, recorded in its folder), or the install fails naming what it needs."""
        manifest = await asyncio.to_thread(_manifest, staging, adapter)
        node = await self.node_for(agent_id, manifest, spec)
        if node is not None:
            await asyncio.to_thread((staging / NODE_MARKER).write_text, node + "\n", "utf-8")

    async def node_for(self, agent_id: str, manifest: dict[str, Any] | None, spec: str) -> str | None:
        """The bridge's own Node.js when a package's ``engines.node`` wants a newer one than the
        system's (brought on demand); None when the system's fits; InstallFailed naming what it needs
        when neither does."""
        engines = manifest.get("engines") if manifest else None
        wanted = engines.get("node") if isinstance(engines, dict) else None
        if not isinstance(wanted, str) or not wanted.strip():
            return None
        system = await node_version(shutil.which("node"))
        if system is not None and node_satisfies(system, wanted) is not False:
            return None
        have = "none" if system is None else "v" + ".".join(map(str, system))
        if self.node is None:
            raise InstallFailed(
                agent_id,
                f"{spec} needs Node.js {wanted} (its engines.node); this system's node is {have}: install a newer "
                "Node.js, or leave ACP_BRIDGE_NODE_ON_DEMAND on (it is off here) so the bridge brings its own",
            )
        node = await self.node.node(agent_id)
        own = await node_version(str(node))
        if own is None or node_satisfies(own, wanted) is False:
            raise InstallFailed(
                agent_id, f"{spec} needs Node.js {wanted}; the bridge's own Node.js ({own}) does not fit"
            )
        log.info("%s needs Node.js %s (system: %s): it runs with %s", spec, wanted, have, node)
        return str(node)

    def _prepare(self, agent_id: str, staging: Path) -> None:
        self.install_dir.mkdir(parents=True, exist_ok=True)
        # What an interrupted install left behind. Several servers may share the install dir (the
        # user's cache dir), so a staging directory younger than any install can run is left alone.
        stale_before = time.time() - max(self.timeout, 3600.0)
        for leftover in self.install_dir.glob(f".{agent_id}.*-*"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < stale_before:
                    shutil.rmtree(leftover, ignore_errors=True)
        if self.recorder is not None:
            self.recorder.made_dir(staging)  # before it exists: a crash from here on leaves it recorded
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
        for key, value in NPM_DEFAULTS.items():
            env.setdefault(key, value)  # the user's own npm settings win
        if self.recorder is not None:
            env.update(self.recorder.env)  # npm's children are found by it even outside its group
        log.info("installing %s: npm install %s (registry %s)", agent_id, spec, env.get("npm_config_registry", "npm's"))
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,  # npm and its scripts are stopped as a group
        )
        self._procs.add(proc)
        if self.recorder is not None:
            self.recorder.started(proc.pid)
        output: deque[str] = deque(maxlen=OUTPUT_LINES)
        try:
            async with asyncio.timeout(self.timeout or None):
                await self._follow(agent_id, proc, output)
                await proc.wait()
        except BaseException as exc:  # timed out, or the server is stopping
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            self._discard(proc)
            elapsed = time.monotonic() - started
            log.warning("install of %s stopped after %.1fs: %s", agent_id, elapsed, type(exc).__name__)
            if isinstance(exc, TimeoutError):
                raise InstallFailed(agent_id, f"npm install {spec} did not finish in {self.timeout:g}s") from None
            raise
        self._discard(proc)
        elapsed = time.monotonic() - started
        if proc.returncode != 0:
            summary = readable_npm_error(list(output))
            log.warning("install of %s failed after %.1fs (exit %s):\n%s", agent_id, elapsed, proc.returncode, summary)
            text = "\n".join(output)[-STDERR_TAIL:]
            raise InstallFailed(
                agent_id, f"npm install {spec} failed (exit {proc.returncode}):\n{summary}\n\nnpm output:\n{text}"
            )
        log.info("installed %s (%s) in %.1fs", agent_id, spec, elapsed)

    def _discard(self, proc: asyncio.subprocess.Process) -> None:
        """npm has exited and was reaped."""
        self._procs.discard(proc)
        if self.recorder is not None:
            self.recorder.stopped(proc.pid)

    @staticmethod
    async def _follow(agent_id: str, proc: asyncio.subprocess.Process, output: deque[str]) -> None:
        """npm's output, line by line, into the log (install progress) and a bounded tail."""
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readline()
            except ValueError:  # a line over the stream limit: take what is there
                raw = await proc.stdout.read(1 << 16)
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                output.append(line[:2000])
                log.info("npm (%s): %s", agent_id, line[:500])


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
