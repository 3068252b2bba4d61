"""The ACP registry's catalog of agents (https://github.com/agentclientprotocol/registry).

The registry publishes one ``registry.json`` ``{"version", "agents": [...], "extensions": [...]}``,
built from one ``<id>/agent.json`` per agent: ``id``, ``name``, ``version``, ``description`` and a
``distribution`` that says how to get the agent, one or more of:

- ``npx``: ``{package, args?, env?}``, an npm package (``name@version``), run as its program;
- ``binary``: per platform (``linux-x86_64``, ``darwin-aarch64``...) ``{archive, cmd, args?, env?,
  sha256?}``, an archive (tar.gz, tar.xz, zip or a bare program) to download and unpack, ``cmd`` the
  program in it;
- ``uvx``: ``{package, args?, env?}``, a PyPI package run by ``uvx``.

The package ships a snapshot of the catalog (``data/acp_registry.json``, made by
``python -m app.agents.catalog_snapshot``, its date recorded); the server refreshes it from
``ACP_BRIDGE_ACP_REGISTRY_URL`` when that is reachable. Only what the bridge needs is kept. Entries
the bridge cannot read are skipped, never fatal.
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

log = logging.getLogger("acp_rest_bridge.agents")

SNAPSHOT = "acp_registry.json"
# The registry's schema for ids (agent.schema.json).
AGENT_ID = re.compile(r"[a-z][a-z0-9-]*")
# Largest catalog document read from the URL.
CATALOG_LIMIT = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PackageDistribution:
    package: str  # npm or PyPI name, with an optional ``@version`` / ``==version``
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BinaryTarget:
    archive: str
    cmd: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # As the catalog wrote it (``expected_sha256`` checks it at install: one present but malformed
    # fails the install, never goes unchecked).
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class CatalogAgent:
    id: str
    name: str
    version: str
    description: str = ""
    npx: PackageDistribution | None = None
    uvx: PackageDistribution | None = None
    binary: dict[str, BinaryTarget] = field(default_factory=dict)

    def target(self) -> BinaryTarget | None:
        """The binary for this machine, if the agent has one."""
        return self.binary.get(platform_key())

    @property
    def distribution(self) -> str | None:
        """How the bridge installs it here: ``npx``, then ``binary``, then ``uvx``."""
        if self.npx is not None:
            return "npx"
        if self.target() is not None:
            return "binary"
        if self.uvx is not None:
            return "uvx"
        return None

    def package_names(self) -> tuple[str, ...]:
        """The npm and PyPI packages it is distributed as, without their versions."""
        names = []
        if self.npx is not None:
            at = self.npx.package.rfind("@")
            names.append(self.npx.package[:at] if at > 0 else self.npx.package)
        if self.uvx is not None:
            names.append(re.split(r"[@=<>~!\[ ]", self.uvx.package, maxsplit=1)[0])
        return tuple(names)

    def program_names(self) -> tuple[str, ...]:
        """The programs its binary archives hold (``cmd`` without its folders and ``.exe``)."""
        found = {t.cmd.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe") for t in self.binary.values()}
        return tuple(sorted(found))

    def to_json(self) -> dict[str, Any]:
        dist: dict[str, Any] = {}
        for name, package in (("npx", self.npx), ("uvx", self.uvx)):
            if package is not None:
                dist[name] = _package_json(package)
        if self.binary:
            dist["binary"] = {key: _target_json(target) for key, target in sorted(self.binary.items())}
        out: dict[str, Any] = {"id": self.id, "name": self.name, "version": self.version}
        if self.description:
            out["description"] = self.description
        out["distribution"] = dist
        return out


@dataclass(frozen=True, slots=True)
class Catalog:
    agents: tuple[CatalogAgent, ...]
    date: str | None  # when the registry was in this state (the snapshot's date, or when fetched)
    source: str  # "snapshot" or the URL it came from

    def get(self, agent_id: str) -> CatalogAgent | None:
        return next((agent for agent in self.agents if agent.id == agent_id), None)


def platform_key() -> str:
    """The registry's name of this platform: ``linux-x86_64``, ``darwin-aarch64``..."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = {"win32": "windows", "cygwin": "windows"}.get(sys.platform, sys.platform.removesuffix("2"))
    return f"{system}-{arch}"


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _env(value: Any) -> dict[str, str]:
    return {str(k): v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def _package(value: Any) -> PackageDistribution | None:
    if not isinstance(value, dict) or not isinstance(value.get("package"), str) or not value["package"]:
        return None
    if value["package"].startswith("-") or any(c.isspace() for c in value["package"]):
        return None  # it is an argument of npm or uv: never an option
    return PackageDistribution(value["package"], _strings(value.get("args")), _env(value.get("env")))


def _target(value: Any) -> BinaryTarget | None:
    if not isinstance(value, dict):
        return None
    archive, cmd, digest = value.get("archive"), value.get("cmd"), value.get("sha256")
    if not isinstance(archive, str) or not isinstance(cmd, str) or not archive or not cmd:
        return None
    sha256 = None if digest is None else digest.strip() if isinstance(digest, str) else json.dumps(digest)
    return BinaryTarget(archive, cmd, _strings(value.get("args")), _env(value.get("env")), sha256)


def expected_sha256(value: str) -> str:
    """The digest a catalog's ``sha256`` names: 64 hex digits, optionally written ``sha256:<hex>``;
    ValueError for anything else."""
    text = value.strip()
    if text[:7].lower() == "sha256:":
        text = text[7:]
    if len(text) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise ValueError(f"malformed sha256 {value[:100]!r}: not 64 hexadecimal digits")
    return text.lower()


class PlainHttpRefused(Exception):
    """A plain-http URL (or a redirect to one) where only https is allowed."""


def https_only(allow_http: bool) -> dict[str, list[Any]]:
    """httpx ``event_hooks`` that refuse a request to a plain-http URL, redirects included (each
    hop's request goes through them), unless ``allow_http``."""

    async def check(request: Any) -> None:
        if request.url.scheme != "https" and not allow_http:
            raise PlainHttpRefused(
                f"{request.url.copy_with(query=None, fragment=None)} is not https "
                "(set ACP_BRIDGE_REGISTRY_ALLOW_HTTP=1 to allow plain-http registries and downloads)"
            )

    return {"request": [check]}


def _package_json(package: PackageDistribution) -> dict[str, Any]:
    out: dict[str, Any] = {"package": package.package}
    if package.args:
        out["args"] = list(package.args)
    if package.env:
        out["env"] = dict(package.env)
    return out


def _target_json(target: BinaryTarget) -> dict[str, Any]:
    out: dict[str, Any] = {"archive": target.archive, "cmd": target.cmd}
    if target.args:
        out["args"] = list(target.args)
    if target.env:
        out["env"] = dict(target.env)
    if target.sha256:
        out["sha256"] = target.sha256
    return out


def parse_agent(entry: Any) -> CatalogAgent | None:
    """One ``agent.json`` (or an entry of ``registry.json``); None when it is not usable."""
    if not isinstance(entry, dict):
        return None
    agent_id, version = entry.get("id"), entry.get("version")
    dist = entry.get("distribution")
    if not isinstance(agent_id, str) or not AGENT_ID.fullmatch(agent_id) or not isinstance(dist, dict):
        return None  # the id names the agent's install folder: the registry's pattern only
    binary: dict[str, BinaryTarget] = {}
    if isinstance(dist.get("binary"), dict):
        for key, value in dist["binary"].items():
            target = _target(value)
            if target is not None:
                binary[str(key)] = target
    agent = CatalogAgent(
        id=agent_id,
        name=str(entry.get("name") or agent_id),
        version=str(version) if isinstance(version, str) else "",
        description=str(entry.get("description") or ""),
        npx=_package(dist.get("npx")),
        uvx=_package(dist.get("uvx")),
        binary=binary,
    )
    if agent.npx is None and agent.uvx is None and not agent.binary:
        return None
    return agent


def parse_catalog(data: Any, source: str, date: str | None = None) -> Catalog:
    """A ``registry.json`` document (or a snapshot, which has the same ``agents`` and a ``date``)."""
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        raise ValueError("not an ACP registry document: no `agents` list")
    agents: list[CatalogAgent] = []
    seen: set[str] = set()
    for entry in data["agents"]:
        agent = parse_agent(entry)
        if agent is None or agent.id in seen:
            log.info("ACP registry (%s): skipped an entry it cannot use: %.200s", source, json.dumps(entry))
            continue
        seen.add(agent.id)
        agents.append(agent)
    found = data.get("date")
    return Catalog(tuple(agents), date or (found if isinstance(found, str) else None), source)


def load_snapshot() -> Catalog:
    """The catalog shipped with the package."""
    try:
        text = resources.files("app.agents").joinpath("data", SNAPSHOT).read_text(encoding="utf-8")
        return parse_catalog(json.loads(text), "snapshot")
    except (OSError, ValueError) as exc:
        log.warning("the ACP registry snapshot cannot be read: %s", exc)
        return Catalog((), None, "snapshot")


class CatalogSource:
    """The catalog the server lists: the snapshot, replaced by the registry's published catalog
    each time a refresh from ``url`` succeeds (when first needed, then at most every ``every``
    seconds, in the background). A failed refresh is logged and changes nothing."""

    def __init__(self, url: str | None, timeout: float = 10.0, every: float = 3600.0, allow_http: bool = False) -> None:
        self.url = url or None
        self.allow_http = allow_http  # plain-http catalogs and archives (and redirects to them)
        self.timeout = timeout
        self.every = every
        self.catalog = load_snapshot()
        self.snapshot_date = self.catalog.date
        self.refreshed_at: float | None = None
        self.last_error: str | None = None
        self._attempted_at: float | None = None

    def due(self) -> bool:
        if self.url is None:
            return False
        return self._attempted_at is None or time.monotonic() - self._attempted_at >= self.every

    async def refresh(self) -> bool:
        """Fetch the catalog from the URL; True when it replaced the one in use."""
        if self.url is None:
            return False
        self._attempted_at = time.monotonic()
        try:
            # httpx is imported, and its client (TLS context, certificates) made, in a thread: tens
            # of milliseconds the event loop would otherwise stand still for.
            client = await asyncio.to_thread(self._client)
            async with client, client.stream("GET", self.url) as response:
                response.raise_for_status()
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > CATALOG_LIMIT:
                        raise ValueError(f"catalog larger than {CATALOG_LIMIT} bytes")
            fetched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            # Parsed off the event loop: the document may be megabytes.
            catalog = await asyncio.to_thread(lambda: parse_catalog(json.loads(bytes(body)), str(self.url), fetched))
        except Exception as exc:  # any failure: the catalog in use stays
            # Offline is a normal place to run: said once (at info), not at every hourly retry. A
            # refused plain-http URL is the operator's to mend: said once at warning.
            said = self.last_error or ""
            level = logging.DEBUG if said else logging.INFO
            if isinstance(exc, PlainHttpRefused) and not said.startswith("PlainHttpRefused"):
                level = logging.WARNING
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.log(
                level,
                "the ACP registry is out of reach (%s: %s): its agents are listed from the %s of %s",
                self.url,
                self.last_error,
                "snapshot" if self.catalog.source == "snapshot" else "catalog fetched",
                self.catalog.date,
            )
            return False
        self.catalog = catalog
        self.refreshed_at = time.time()
        self.last_error = None
        log.info("ACP registry refreshed from %s: %d agents", self.url, len(catalog.agents))
        return True

    def _client(self) -> Any:
        import httpx

        return httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, event_hooks=https_only(self.allow_http))

    def info(self) -> dict[str, Any]:
        """What ``GET /v1/agents`` tells about the catalog (``_meta``)."""
        out: dict[str, Any] = {
            "source": self.catalog.source,
            "date": self.catalog.date,
            "snapshotDate": self.snapshot_date,
            "agents": len(self.catalog.agents),
            "url": self.url,
        }
        if self.last_error is not None:
            out["lastError"] = self.last_error
        return out
