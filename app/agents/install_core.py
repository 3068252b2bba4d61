"""What every agent installer shares: ``install.Installer`` (the legacy ids' npm adapters) and
``catalog_install.CatalogInstaller`` (the ACP registry's agents) are built on one ``InstallCore``.

- One install per key at a time (``lock``); callers that ask meanwhile wait for it.
- An install is made in a staging folder (``staging``) and moved into place (``swap_in``) only once
  it is complete, so a failed, timed-out or interrupted install leaves the previous one (or none)
  as it was.
- Each step (npm, pip, uv) runs with ``run``: its own process group (``app.process_group``),
  bounded by the install time limit, killed when the install is cancelled.
- Whatever a crash could leave is recorded with the server's process registry (``recorder``)
  before it exists: the steps' process groups, the staging folders, folders a step makes beside
  them (``record_dir``), the replaced install on its way out. The next server on the data dir ends
  and removes them.
- ``shutdown`` kills every running step and waits for the installs to clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import InstallFailed
from app.process_group import Finished, Overdue, ProcessGroup, Recorder, run

from .node import OnDemandNode, node_satisfies, node_version

log = logging.getLogger("acp_rest_bridge.install")

# Characters of a failed step's output kept in its error.
STDERR_TAIL = 4000


@dataclass(frozen=True, slots=True)
class Staging:
    """An install's staging folder and the token that names it (and its other folders)."""

    path: Path
    token: str


class InstallCore:
    def __init__(
        self,
        install_dir: Path,
        timeout: float,
        node: OnDemandNode | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.install_dir = install_dir
        self.timeout = timeout  # seconds each step may take (0: no limit)
        self.node = node  # Node.js on demand (None: off)
        self.recorder = recorder  # where process groups and folders are recorded for crash clean-up
        self.locks: dict[str, asyncio.Lock] = {}
        self.running: set[ProcessGroup] = set()  # the steps' process groups running now
        self.active = 0  # installs whose staging folder is not removed yet
        self._idle = asyncio.Event()
        self._idle.set()

    def lock(self, key: str) -> asyncio.Lock:
        """The lock of one agent's install (or of a tool installs share)."""
        return self.locks.setdefault(key, asyncio.Lock())

    # ---- folders -----------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def staging(self, root: Path, name: str, spare: Path | None = None) -> AsyncIterator[Staging]:
        """A new, empty ``<root>/.<name>.staging-<token>``, recorded before it is made and removed
        (with its record) when the install is done, whatever the outcome. Leftovers of ``name``'s
        interrupted installs older than any install can run are removed first (not ``spare``)."""
        token = secrets.token_hex(4)
        staging = Staging(root / f".{name}.staging-{token}", token)
        self.active += 1
        self._idle.clear()
        try:
            await asyncio.to_thread(self._prepare, root, name, staging.path, spare)
            yield staging
        finally:
            try:
                await self.remove_dir(staging.path)
            finally:
                self.active -= 1
                if not self.active:
                    self._idle.set()

    def _prepare(self, root: Path, name: str, staging: Path, spare: Path | None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        # Several servers may share the install dir (the user's cache dir), so a leftover younger
        # than any install can run is left alone.
        stale_before = time.time() - max(self.timeout, 3600.0)
        for leftover in root.glob(f".{glob.escape(name)}.*-*"):
            if leftover == spare:
                continue
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < stale_before:
                    shutil.rmtree(leftover, ignore_errors=True)
        self._made(staging)
        staging.mkdir()

    def _made(self, path: Path) -> None:
        if self.recorder is not None:
            self.recorder.made_dir(path)  # before it exists: a crash from here on leaves it recorded

    async def record_dir(self, path: Path) -> None:
        """A folder an install step is about to make beside its staging folder (removed with
        ``remove_dir`` if the install fails, or kept with ``release_dir``)."""
        await asyncio.to_thread(self._made, path)

    def release_dir(self, path: Path) -> None:
        """A recorded folder is gone, or kept for good: no longer for a sweep to remove."""
        if self.recorder is not None:
            self.recorder.removed_dir(path)

    async def remove_dir(self, path: Path) -> None:
        """Remove a recorded folder (shielded: a second cancellation, the server's last sweep,
        does not stop it) and its record."""
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, path, True))
        self.release_dir(path)

    def swap_in(self, staging: Staging, target: Path) -> None:
        """Move a complete install into place, the previous one (if any) out and away. Blocking."""
        old = target.with_name(f".{target.name}.old-{staging.token}")
        replaced = target.exists()
        if replaced:
            self._made(old)
            target.rename(old)
        staging.path.rename(target)
        if replaced:
            shutil.rmtree(old, ignore_errors=True)
            self.release_dir(old)

    # ---- steps -------------------------------------------------------------------------------------
    async def run(
        self,
        agent_id: str,
        argv: Sequence[str],
        what: str,
        *,
        env: Mapping[str, str] | None = None,
        on_line: Callable[[str], None] | None = None,
        check: bool = True,
    ) -> Finished:
        """A step of an install (``app.process_group.run``), bounded by the install time limit, its
        group recorded and in ``running``. InstallFailed when it does not finish in time and, with
        ``check``, when it fails (its output's tail in the error)."""
        started = time.monotonic()
        try:
            done = await run(
                argv,
                timeout=self.timeout,
                what=what,
                env=env,
                recorder=self.recorder,
                on_line=on_line,
                running=self.running,
            )
        except BaseException as exc:  # timed out, or the server is stopping
            elapsed = time.monotonic() - started
            log.warning("install of %s stopped after %.1fs (%s): %s", agent_id, elapsed, what, type(exc).__name__)
            if isinstance(exc, Overdue):
                raise InstallFailed(agent_id, str(exc)) from None
            raise
        if check and done.returncode != 0:
            raise InstallFailed(agent_id, f"{what} failed (exit {done.returncode}):\n{done.tail(STDERR_TAIL)}")
        return done

    async def npm(self, agent_id: str) -> str:
        """npm's command: the system's, else the on-demand Node.js's (brought now if need be)."""
        npm = shutil.which("npm")
        if self.node is not None and (npm is None or Path(npm).parent == self.node.bin_dir):
            # The on-demand Node.js's bin/npm cannot find npm's code: its own entry point can.
            npm = await self.node.npm(agent_id)
        if npm is None:
            raise InstallFailed(agent_id, f"npm is not on PATH: {agent_id} is installed with npm (install Node.js)")
        return npm

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

    # ---- the server's end --------------------------------------------------------------------------
    async def shutdown(self, timeout: float = 3.0) -> None:
        """Stop every running install: its steps' process groups killed, its staging folder removed
        (by the install itself, whose request the server cancels; this waits for them)."""
        for group in list(self.running):
            group.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
