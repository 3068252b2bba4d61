"""Installing agents of the ACP registry's catalog (``acp_catalog``) into ``<install dir>/acp-registry/<id>``.

- ``npx``: ``npm install --prefix`` of its package (the catalog's version, or the session's
  ``agentVersion``); the agent runs as the package's program (``bin`` of its ``package.json``).
- ``binary``: the archive for this platform is downloaded (bounded in size and time), checked
  against its ``sha256`` when the catalog gives one, and unpacked (tar, tar.gz/xz/bz2, zip, or a
  bare program); no member may land outside the install folder. The agent runs as its ``cmd``.
- ``uvx``: ``uv tool install`` of its PyPI package (uv's own settings apply: ``UV_INDEX_URL``...)
  into ``<install dir>/acp-registry/.<id>.uv-<n>``; the agent runs as the package's program, as
  ``uvx`` would run it, with no network needed at start. ``uv`` is the one on PATH, else it is
  installed from PyPI with pip (``pip install uv``) into ``<install dir>/acp-registry/.uv``, once.

As for the legacy agents (``install.Installer``, whose npm runner, locks and time limit are
shared): one install per agent at a time, made in a staging folder and moved into place only when
it is complete, so a failure leaves the previous install (or none) as it was; failures are
``InstallFailed`` (500 ``install_failed``). ``.acp-registry.json`` in the folder records what was
installed: id, version, distribution and the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import signal
import stat
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

from app.errors import InstallFailed

from .acp_catalog import BinaryTarget, CatalogAgent, PlainHttpRefused, expected_sha256, https_only
from .install import STDERR_TAIL, Installer

log = logging.getLogger("acp_rest_bridge.install")

MANIFEST = ".acp-registry.json"
# Largest archive downloaded for a binary agent.
DOWNLOAD_LIMIT = 1024 * 1024 * 1024
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar")


def package_spec(package: str, version: str | None) -> str:
    """An npm package spec with ``version`` in place of the catalog's (``@scope/name@1.2.3``)."""
    if not version:
        return package
    at = package.rfind("@")
    name = package[:at] if at > 0 else package
    return f"{name}@{version}"


def _npm_name(spec: str) -> str:
    at = spec.rfind("@")
    return spec[:at] if at > 0 else spec


def agent_env(agent: CatalogAgent) -> dict[str, str]:
    """The environment a catalog entry gives its agent (of the distribution this machine uses)."""
    kind = agent.distribution
    target = agent.target()
    if kind == "npx" and agent.npx is not None:
        return agent.npx.env
    if kind == "uvx" and agent.uvx is not None:
        return agent.uvx.env
    if kind == "binary" and target is not None:
        return target.env
    return {}


def recorded_env(manifest: dict[str, Any]) -> dict[str, str]:
    """The environment recorded at install (none for an install made before it was recorded)."""
    env = manifest.get("env")
    if not isinstance(env, dict):
        return {}
    return {k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)}


def installed_manifest(folder: Path) -> dict[str, Any] | None:
    """What is installed in ``folder`` (its manifest), with ``command`` made absolute; None if nothing
    usable is there."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return None
    program = folder / command[0]
    if not (program.is_file() and os.access(program, os.X_OK)):
        return None
    node = data.get("node")  # an npm agent that needs a newer Node.js than the system's: the bridge's
    if isinstance(node, str) and os.access(node, os.X_OK):
        return {**data, "command": [node, str(program), *command[1:]]}
    return {**data, "command": [str(program), *command[1:]]}


class CatalogInstaller:
    def __init__(self, installer: Installer, download_limit: int = DOWNLOAD_LIMIT, *, allow_http: bool = False) -> None:
        self.installer = installer
        self.root = installer.install_dir / "acp-registry"
        self.download_limit = download_limit
        self.allow_http = allow_http  # plain-http archives (and redirects to them)

    def folder(self, agent_id: str) -> Path:
        return self.root / agent_id

    def installed(self, agent_id: str) -> dict[str, Any] | None:
        return installed_manifest(self.folder(agent_id))

    async def install(self, agent: CatalogAgent, version: str | None = None, *, reinstall: bool = False) -> None:
        kind = agent.distribution
        if kind is None:
            raise InstallFailed(agent.id, f"{agent.id} has no distribution for this platform in the ACP registry")
        lock = self.installer._locks.setdefault(f"acp-registry/{agent.id}", asyncio.Lock())
        async with lock:
            if not reinstall and self.installed(agent.id) is not None:
                return  # installed while this call waited for another
            await self._install(agent, kind, version)

    async def _install(self, agent: CatalogAgent, kind: str, version: str | None) -> None:
        token = secrets.token_hex(4)
        staging = self.root / f".{agent.id}.staging-{token}"
        installer = self.installer
        installer._active += 1
        installer._idle.clear()
        try:
            await asyncio.to_thread(self._prepare, agent.id, staging)
            if kind == "npx":
                manifest = await self._npx(agent, staging, version)
            elif kind == "uvx":
                manifest = await self._uvx(agent, version, token)
            else:
                target = agent.target()
                assert target is not None
                manifest = await self._binary(agent, target, staging)
            # The agent runs with the environment of the catalog entry it was installed from; a
            # later catalog's applies after a reinstall.
            manifest["env"] = dict(agent_env(agent))
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
            if installed_manifest(staging) is None:
                raise InstallFailed(
                    agent.id, f"{agent.id}: the installed program {manifest['command'][0]!r} is missing"
                )
            await asyncio.to_thread(self._swap_in, agent.id, staging, token)
            log.info("installed %s from the ACP registry (%s %s)", agent.id, kind, manifest.get("version"))
        except OSError as exc:
            raise InstallFailed(agent.id, f"{type(exc).__name__}: {exc}") from exc
        finally:
            try:
                await asyncio.shield(asyncio.to_thread(shutil.rmtree, staging, True))
            finally:
                installer._active -= 1
                if not installer._active:
                    installer._idle.set()

    # ---- npx ---------------------------------------------------------------------------------------
    async def _npx(self, agent: CatalogAgent, staging: Path, version: str | None) -> dict[str, Any]:
        assert agent.npx is not None
        npm = shutil.which("npm")
        if npm is None and self.installer.node is not None:
            npm = await self.installer.node.npm(agent.id)
        if npm is None:
            raise InstallFailed(agent.id, f"npm is not on PATH: {agent.id} is an npm package (install Node.js)")
        spec = package_spec(agent.npx.package, version)
        # As `npx` would: the package's install scripts run.
        argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), spec]
        await self.installer._run_npm(agent.id, argv, spec)
        name = _npm_name(spec)
        program, installed_version = await asyncio.to_thread(_npm_program, staging, name)
        if program is None:
            raise InstallFailed(agent.id, f"npm installed {spec}, but it declares no program (`bin`)")
        package = await asyncio.to_thread(_package_json, staging, name)
        node = await self.installer.node_for(agent.id, package, spec)  # Node.js on demand, as for legacy ids
        return {
            **({"node": node} if node is not None else {}),
            "id": agent.id,
            "version": installed_version or version or agent.version,
            "distribution": "npx",
            "package": spec,
            "command": [f"node_modules/.bin/{program}", *agent.npx.args],
            "installedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    # ---- uvx ---------------------------------------------------------------------------------------
    async def _uvx(self, agent: CatalogAgent, version: str | None, token: str) -> dict[str, Any]:
        assert agent.uvx is not None
        uv = await self._uv(agent.id)
        spec = agent.uvx.package
        name = _pypi_name(spec)
        if version:
            spec = f"{name}=={version}"
        # uv's tool environments keep absolute paths: they are made where they stay (the manifest,
        # swapped in, points at them; the previous one is removed then).
        tools = self.root / f".{agent.id}.uv-{token}"
        env = {**os.environ, "UV_TOOL_DIR": str(tools / "tools"), "UV_TOOL_BIN_DIR": str(tools / "bin")}
        env.setdefault("UV_NO_PROGRESS", "1")
        try:
            await self._run(agent.id, [uv, "tool", "install", "--force", spec], env, f"uv tool install {spec}")
            programs = sorted(p.name for p in (tools / "bin").iterdir()) if (tools / "bin").is_dir() else []
            program = name if name in programs else (programs[0] if len(programs) == 1 else None)
            if program is None:
                raise InstallFailed(
                    agent.id, f"uv installed {spec}, but its programs are {programs}, none named {name}"
                )
        except BaseException:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, tools, True))
            raise
        return {
            "id": agent.id,
            "version": version or _pypi_version(agent.uvx.package) or agent.version,
            "distribution": "uvx",
            "package": spec,
            "tools": str(tools),
            "command": [str(tools / "bin" / program), *agent.uvx.args],
            "installedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    async def _uv(self, agent_id: str) -> str:
        """uv: on PATH, else installed from PyPI with pip (once, in the install dir)."""
        found = shutil.which("uv")
        if found is not None:
            return found
        home = self.root / ".uv"
        program = home / "bin" / "uv"
        async with self.installer._locks.setdefault("acp-registry/.uv", asyncio.Lock()):
            if program.is_file():
                return str(program)
            staging = self.root / f".uv.staging-{secrets.token_hex(4)}"
            argv = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
            argv += ["--target", str(staging), "uv"]
            try:
                await self._run(agent_id, argv, dict(os.environ), "pip install uv")
                if not (staging / "bin" / "uv").is_file():
                    raise InstallFailed(agent_id, "pip installed uv, but it has no program bin/uv")
                await asyncio.to_thread(staging.rename, home)
            finally:
                await asyncio.shield(asyncio.to_thread(shutil.rmtree, staging, True))
        return str(program)

    async def _run(self, agent_id: str, argv: list[str], env: dict[str, str], what: str) -> None:
        """A step of an install, in its own process group, bounded by the install time limit."""
        log.info("installing %s: %s", agent_id, what)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.installer._procs.add(proc)
        try:
            async with asyncio.timeout(self.installer.timeout or None):
                output, _ = await proc.communicate()
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            if isinstance(exc, TimeoutError):
                raise InstallFailed(agent_id, f"{what} did not finish in {self.installer.timeout:g}s") from None
            raise
        finally:
            self.installer._procs.discard(proc)
        if proc.returncode != 0:
            text = output.decode("utf-8", "replace")[-STDERR_TAIL:]
            raise InstallFailed(agent_id, f"{what} failed (exit {proc.returncode}):\n{text}")

    # ---- binary ------------------------------------------------------------------------------------
    async def _binary(self, agent: CatalogAgent, target: BinaryTarget, staging: Path) -> dict[str, Any]:
        expected = None
        if target.sha256 is not None:
            try:
                expected = expected_sha256(target.sha256)
            except ValueError as exc:
                raise InstallFailed(agent.id, f"the registry's sha256 for {target.archive}: {exc}") from None
        download = staging / ".download"
        try:
            async with asyncio.timeout(self.installer.timeout or None):
                digest = await self._download(agent.id, target.archive, download)
        except TimeoutError:
            raise InstallFailed(
                agent.id, f"download of {target.archive} did not finish in {self.installer.timeout:g}s"
            ) from None
        if expected is not None and digest != expected:
            raise InstallFailed(
                agent.id, f"checksum mismatch for {target.archive}: expected sha256 {expected}, got {digest}"
            )
        files = staging / "files"
        await asyncio.to_thread(_unpack, agent.id, download, target, files)
        command = _inside(agent.id, files, target.cmd)
        return {
            "id": agent.id,
            "version": agent.version,
            "distribution": "binary",
            "archive": target.archive,
            "sha256": digest,
            "command": [str(command.relative_to(staging)), *target.args],
            "installedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    async def _download(self, agent_id: str, url: str, path: Path) -> str:
        import httpx

        log.info("installing %s: downloading %s", agent_id, url)
        digest = hashlib.sha256()
        size = 0
        try:
            async with (
                httpx.AsyncClient(
                    follow_redirects=True, timeout=httpx.Timeout(30.0), event_hooks=https_only(self.allow_http)
                ) as client,
                client.stream("GET", url) as response,
            ):
                if response.status_code != 200:
                    raise InstallFailed(agent_id, f"download of {url} failed: HTTP {response.status_code}")
                out = await asyncio.to_thread(path.open, "wb")
                try:
                    async for chunk in response.aiter_bytes(1 << 16):
                        size += len(chunk)
                        if size > self.download_limit:
                            raise InstallFailed(agent_id, f"{url} is larger than {self.download_limit} bytes")
                        digest.update(chunk)
                        await asyncio.to_thread(out.write, chunk)
                finally:
                    await asyncio.shield(asyncio.to_thread(out.close))
        except PlainHttpRefused as exc:
            raise InstallFailed(agent_id, f"download of {url} refused: {exc}") from None
        except httpx.HTTPError as exc:
            raise InstallFailed(agent_id, f"download of {url} failed: {type(exc).__name__}: {exc}") from exc
        return digest.hexdigest()

    # ---- staging -----------------------------------------------------------------------------------
    def _prepare(self, agent_id: str, staging: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        stale_before = time.time() - max(self.installer.timeout, 3600.0)
        current = self.installed(agent_id)
        in_use = Path(current["tools"]) if current and isinstance(current.get("tools"), str) else None
        for leftover in self.root.glob(f".{agent_id}.*-*"):
            if leftover == in_use:
                continue
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < stale_before:
                    shutil.rmtree(leftover, ignore_errors=True)
        staging.mkdir()

    def _swap_in(self, agent_id: str, staging: Path, token: str) -> None:
        target = self.folder(agent_id)
        old = self.root / f".{agent_id}.old-{token}"
        previous = installed_manifest(target) if target.exists() else None
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        # A uvx install's tool environments live beside it: the replaced one goes too.
        tools = previous.get("tools") if previous else None
        if isinstance(tools, str) and Path(tools).parent == self.root and Path(tools).name != f".{agent_id}.uv-{token}":
            shutil.rmtree(tools, ignore_errors=True)


def _pypi_name(spec: str) -> str:
    """The distribution name of a uvx package spec (``name``, ``name@1.0``, ``name==1.0``)."""
    for separator in ("@", "==", ">=", "<=", "~=", "[", " "):
        spec = spec.split(separator, 1)[0]
    return spec.strip()


def _pypi_version(spec: str) -> str | None:
    for separator in ("@", "=="):
        if separator in spec:
            return spec.split(separator, 1)[1].strip() or None
    return None


def _package_json(prefix: Path, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads((prefix / "node_modules" / name / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _npm_program(prefix: Path, name: str) -> tuple[str | None, str | None]:
    """The program an npm package declares (its ``bin``) and its version."""
    try:
        manifest = json.loads((prefix / "node_modules" / name / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    version = manifest.get("version") if isinstance(manifest.get("version"), str) else None
    declared = manifest.get("bin")
    base = name.rsplit("/", 1)[-1]
    program: str | None = None
    if isinstance(declared, str):
        program = base
    elif isinstance(declared, dict) and declared:
        program = base if base in declared else str(next(iter(declared)))
    if program is None or not (prefix / "node_modules" / ".bin" / program).exists():
        return None, version
    return program, version


def _inside(agent_id: str, root: Path, relative: str) -> Path:
    """``relative`` under ``root``; an install failure if it would leave it."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise InstallFailed(agent_id, f"the registry's command {relative!r} leaves the install folder")
    return path


def _unpack(agent_id: str, archive: Path, target: BinaryTarget, dest: Path) -> None:
    dest.mkdir()
    name = target.archive.rsplit("?", 1)[0].lower()
    try:
        if name.endswith(_TAR_SUFFIXES) or (not name.endswith(".zip") and tarfile.is_tarfile(archive)):
            with tarfile.open(archive) as tar:
                _untar(agent_id, tar, dest)
        elif name.endswith(".zip") or zipfile.is_zipfile(archive):
            _unzip(agent_id, archive, dest)
        else:  # a bare program
            program = _inside(agent_id, dest, target.cmd)
            program.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(archive, program)
            program.chmod(0o755)
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise InstallFailed(agent_id, f"cannot unpack {target.archive}: {exc}") from exc
    program = _inside(agent_id, dest, target.cmd)
    if program.is_file() and not os.access(program, os.X_OK):
        program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _untar(agent_id: str, tar: tarfile.TarFile, dest: Path) -> None:
    """Unpack into ``dest`` member by member, each checked against what is on disk right before it
    is written (links made by earlier members resolved), so no chain of links, each harmless when
    checked alone, leads a later member out: on every Python, whether or not it has tarfile's "data"
    filter (3.11.4+; Debian 12's 3.11.2 has not), which is applied too where it exists. Refused:
    absolute names, a member whose folder resolves outside, a link whose target does, a member
    written over a link, special files. Modes lose set-id bits and writing by others; owners are not
    kept. Then every link is followed once more."""
    root = os.path.realpath(dest)
    extra: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}

    def refuse(member: tarfile.TarInfo, why: str) -> InstallFailed:
        return InstallFailed(agent_id, f"the archive's entry {member.name[:200]!r} {why}")

    def within(path: str) -> bool:
        real = os.path.realpath(path)
        return real == root or real.startswith(root + os.sep)

    for member in tar:
        name = member.name
        if os.path.isabs(name) or name.startswith(("/", "\\")):
            raise refuse(member, "is absolute")
        path = os.path.join(root, name)
        if not within(os.path.dirname(path)) or not within(path):
            raise refuse(member, "leads outside the install folder")
        if os.path.islink(path) or (os.path.lexists(path) and not (member.isdir() and os.path.isdir(path))):
            raise refuse(member, "would replace what an earlier entry made")
        if member.issym():
            if os.path.isabs(member.linkname) or not within(os.path.join(os.path.dirname(path), member.linkname)):
                raise refuse(member, f"links outside the install folder ({member.linkname[:200]!r})")
        elif member.islnk():
            source = os.path.join(root, member.linkname)
            if os.path.isabs(member.linkname) or not within(source) or not os.path.isfile(source):
                raise refuse(member, f"is a hard link to {member.linkname[:200]!r}, not a file of the archive")
        elif not (member.isfile() or member.isdir()):
            raise refuse(member, "is not a file, folder or link")
        member.mode = (member.mode or 0o644) & 0o755
        member.uid, member.gid = os.getuid(), os.getgid()
        member.uname = member.gname = ""
        tar.extract(member, root, numeric_owner=True, **extra)
    for folder, dirs, files in os.walk(dest):
        for entry in dirs + files:
            made = Path(folder, entry)
            if made.is_symlink():
                _inside(agent_id, dest, os.path.relpath(os.path.realpath(made), dest))


def _unzip(agent_id: str, archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            path = _inside(agent_id, dest, info.filename)
            if info.is_dir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(path, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                path.chmod(mode)
