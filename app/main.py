"""``create_app(settings)`` and the ``acp-rest-bridge`` command line."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from app import datadir, startup
from app.acp.orphans import ProcessRegistry
from app.agents.node import OnDemandNode
from app.agents.registry import AgentRegistry, AgentsFileError
from app.events.log import trim_heap
from app.events.sqlite import SqliteEventStore, StoreError
from app.events.store import EventStore
from app.sessions import retention
from app.sessions.client_services import ClientServices
from app.sessions.manager import SessionManager
from app.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from app.api.middleware import ASGIApp

VERSION = "0.1.0"
LOG_FORMAT = "%(levelname)-9s %(name)s: %(message)s"
SHUTDOWN_GRACE = 2  # seconds (uvicorn takes whole seconds)


def open_store(settings: Settings) -> EventStore:
    """The durable event store in the data dir; it touches the disk only when the server starts."""
    return SqliteEventStore(settings.resolved_data_dir(), backlog_bytes=settings.event_backlog_bytes)


class Services:
    """Every service of the server, built here, once, from the settings, and handed on. Nothing of
    the HTTP layer: ``create_api`` builds that on top of them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        cache_dir = settings.cache_dir()
        self.node = OnDemandNode(cache_dir / "node", settings.install_timeout) if settings.node_on_demand else None
        self.registry = AgentRegistry(
            settings.agents_file,
            install_dir=cache_dir / "bin",
            install_timeout=settings.install_timeout,
            node=self.node,
        )
        self.store = open_store(settings)
        # What the bridge answers when an agent asks (permissions, files, terminals...).
        self.client_services = ClientServices()
        # Agent and terminal process groups, so the next server on the data dir can end a crashed run's.
        self.processes = ProcessRegistry(settings.resolved_data_dir() / "processes")
        self.manager = SessionManager(settings, self.registry, self.store, self.client_services, self.processes)
        # Whether the server has begun to stop (set by the command line to its uvicorn server's
        # `should_exit`): open SSE streams then end, as uvicorn waits for them before shutdown.
        self.stopping: Callable[[], bool] = lambda: False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """From start to shutdown: the data dir, the store, what an earlier run left, the sessions."""
        settings, store, processes, manager = self.settings, self.store, self.processes, self.manager
        datadir.prepare(settings)
        if self.node is not None:
            self.node.activate()  # a Node.js installed on demand by an earlier run
        store.open()
        pruning = None
        try:
            # The data dir is this server's now: end what an earlier run left alive.
            await asyncio.to_thread(processes.sweep)
            processes.open()
            manager.restore()
            await manager.settle_restored()
            if settings.retention_days > 0:
                pruning = asyncio.create_task(retention.run(manager, settings.retention_days), name="retention")
            yield
        finally:
            if pruning is not None:
                pruning.cancel()
            if self.registry.installer is not None:
                await self.registry.installer.shutdown()
            await manager.shutdown()
            processes.close()
            store.close()  # commits every event still queued
            datadir.remove(settings)


def settle_memory() -> None:
    """What is loaded by now (FastAPI, the routers and models, the ACP SDK) lives as long as the
    server; keeping it out of the collector makes every full collection during an agent's burst
    that much cheaper. The collector runs from here on (the command line starts without it), and
    what start-up freed goes back to the system."""
    gc.collect()
    gc.freeze()
    gc.enable()
    trim_heap()


def middleware_options(settings: Settings) -> dict[str, Any]:
    """The settings of the one pure ASGI layer (``BridgeMiddleware``)."""
    return {
        "token": settings.token,
        "body_limit": settings.body_limit,
        "cors_origins": settings.cors_allow_origin,
        "cors_methods": settings.cors_allow_method,
        "cors_headers": settings.cors_allow_header,
        "cors_credentials": settings.cors_allow_credentials,
    }


def create_api(services: Services, lifespan: Any = None) -> FastAPI:
    """The HTTP application (FastAPI: routers, legacy models, OpenAPI) on top of the services.
    Imported here, not at start: the server answers ``GET /v1/health`` before this is built."""
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response

    from app.api import (
        agents,
        events,
        fastapi_options,
        fs,
        health,
        openapi,
        permissions,
        problems,
        questions,
        routing,
        sessions,
        ui,
    )
    from app.api.middleware import BridgeMiddleware

    app = FastAPI(
        title="acp-rest-bridge",
        version=VERSION,
        description="The sandbox-agent v0.1 REST API (sessions, universal events, SSE, filesystem) "
        "served on top of ACP coding agents.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        redirect_slashes=False,  # legacy: no trailing-slash tolerance
        **fastapi_options.app_options(),
    )
    app.state.settings = services.settings
    app.state.registry = services.registry
    app.state.manager = services.manager
    app.state.store = services.store
    app.state.stopping = lambda: services.stopping()
    problems.install(app)
    openapi.install(app)
    routing.include(app, [r.router for r in (health, agents, sessions, events, permissions, questions, fs)])
    ui.install(app)

    async def server_info(request: Request) -> Response:
        return PlainTextResponse(problems.SERVER_INFO)

    # A plain route: FastAPI would read its annotations in this module's namespace, not this function's.
    app.add_route("/", server_info, methods=["GET"], include_in_schema=False)

    # One pure ASGI layer: CORS (answers every OPTIONS) -> auth -> body limit -> encoded-path routing.
    app.add_middleware(BridgeMiddleware, on_error=problems.problem_response, **middleware_options(services.settings))
    return app


def create_app(settings: Settings | None = None) -> FastAPI:
    """The composition root: the services and the HTTP application on them, whose lifespan runs
    the services (as an ASGI app in a test, or for the OpenAPI document)."""
    services = Services(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with services.running():
            settle_memory()
            yield

    return create_api(services, lifespan)


def create_front(services: Services, on_failure: Callable[[str], None]) -> startup.Front:
    """What the server runs: the services start (lifespan) and ``GET /v1/health`` is answered
    before the HTTP application is built; it is built right after start (``startup.Front``)."""
    from app.api.middleware import BridgeMiddleware

    def build() -> ASGIApp:
        app = create_api(services)
        settle_memory()
        return app

    def early(inner: ASGIApp) -> ASGIApp:
        return BridgeMiddleware(inner, on_error=startup.problem_app, **middleware_options(services.settings))

    return startup.Front(services.running, build, early, on_failure)


def openapi_document(app: FastAPI | None = None) -> dict[str, Any]:
    return (app or create_app(Settings())).openapi()


# ---- command line ------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-rest-bridge",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the sandbox-agent v0.1 REST/SSE API on top of ACP coding agents: each session\n"
        "runs an agent (the built-in `mock`, claude, codex, opencode, amp or one of an agents file)\n"
        "and its traffic becomes the legacy event stream.",
        epilog="Start a server on 127.0.0.1:2468:  acp-rest-bridge server\n"
        "Its options:                       acp-rest-bridge server --help\n"
        "Every option can also be an environment variable ACP_BRIDGE_<NAME>; all of them with\n"
        "their defaults:                    acp-rest-bridge settings",
    )
    parser.add_argument("--version", action="version", version=f"acp-rest-bridge {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser(
        "server",
        help="run the HTTP server",
        description="Run the HTTP server (default 127.0.0.1:2468) until SIGTERM or Ctrl-C. Flags win over "
        "ACP_BRIDGE_* environment variables; `acp-rest-bridge settings` lists every setting.",
    )
    server.add_argument("-H", "--host", help="bind address (default 127.0.0.1; env ACP_BRIDGE_HOST)")
    server.add_argument("-p", "--port", type=int, help="port (default 2468; env ACP_BRIDGE_PORT)")
    server.add_argument("-t", "--token", help="require this token on /v1 (env ACP_BRIDGE_TOKEN)")
    server.add_argument("-n", "--no-token", action="store_true", default=None, help="accepted for compatibility")
    server.add_argument("-O", "--cors-allow-origin", action="append", help="allowed CORS origin (repeatable)")
    server.add_argument("-M", "--cors-allow-method", action="append", help="allowed CORS method (repeatable)")
    server.add_argument("-A", "--cors-allow-header", action="append", help="allowed CORS header (repeatable)")
    server.add_argument(
        "-C", "--cors-allow-credentials", action="store_true", default=None, help="allow CORS credentials"
    )
    server.add_argument("--agents-file", type=Path, help="TOML file of extra ACP agents")
    server.add_argument("--data-dir", type=Path, help="where events are kept (default: a private dir per run)")
    server.add_argument(
        "--fs-root", dest="fs_roots", action="append", help="confine /v1/fs and agent file access here (repeatable)"
    )
    server.add_argument("--log-level", help="log level (default warning)")

    export = sub.add_parser("openapi", help="print the OpenAPI document this server serves")
    export.add_argument("--out", type=Path, help="write to this file instead of stdout")

    sub.add_parser("settings", help="print the table of server options (as in README.md)")
    return parser


def settings_error(exc: ValidationError) -> str:
    """One line for a bad flag or ACP_BRIDGE_* value."""
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"])
        parts.append(f"--{name.replace('_', '-')} / ACP_BRIDGE_{name.upper()}: {error['msg']}")
    return "invalid setting " + "; ".join(parts)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {key: value for key, value in vars(args).items() if key not in ("command", "out") and value is not None}
    return Settings(**overrides)


def cli(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "openapi":
        document = json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"
        if args.out:
            args.out.write_text(document, encoding="utf-8")
        else:
            sys.stdout.write(document)
        return
    if args.command == "settings":
        from app.settings_table import render

        sys.stdout.write(render())
        return
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        sys.exit(f"acp-rest-bridge: {settings_error(exc)}")
    if settings.cors_allow_credentials and (not settings.cors_allow_method or not settings.cors_allow_header):
        sys.exit(
            "acp-rest-bridge: --cors-allow-credentials needs explicit --cors-allow-method and "
            "--cors-allow-header values (browsers reject credentials with wildcards)"
        )
    if "*" in settings.cors_allow_origin:
        # As legacy: a wildcard is not an origin; it would otherwise silently match nothing.
        sys.exit(
            "acp-rest-bridge: --cors-allow-origin '*' is not supported: list each allowed origin "
            "(e.g. -O http://localhost:5173), repeating the flag"
        )
    try:
        services = Services(settings)
        datadir.prepare(settings)
        services.store.open()  # here, so a locked or unusable data dir is a one-line error
        sock = startup.listen(settings.host, settings.port)
    except (AgentsFileError, StoreError, startup.StartError, OSError) as exc:
        datadir.remove(settings)
        sys.exit(f"acp-rest-bridge: {exc}")
    print(startup.startup_line(settings, services.registry, sock), file=sys.stderr, flush=True)
    warning = startup.open_api_warning(settings)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    import uvicorn

    # The bridge's own records (and the ACP SDK's, which go to the root logger) at the chosen level.
    level = logging.getLevelName(settings.log_level.upper())
    logging.basicConfig(level=level if isinstance(level, int) else logging.INFO, format=LOG_FORMAT)
    failures: list[str] = []

    def fail(reason: str) -> None:  # the HTTP application could not be built: stop, say why
        failures.append(reason)
        server.should_exit = True

    # The legacy API has no WebSocket route: no WebSocket library is loaded.
    # SIGTERM: requests still running after SHUTDOWN_GRACE seconds (an npm install nobody waits for,
    # a long create) are cancelled, which stops what they started, so the server exits promptly.
    config = uvicorn.Config(
        create_front(services, fail),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        ws="none",
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    server = uvicorn.Server(config)
    services.stopping = lambda: server.should_exit
    # uvicorn stops gracefully on SIGINT as on SIGTERM, then raises the signal again with the handler
    # that was there before it ran: Python's default for SIGINT would then print a KeyboardInterrupt
    # traceback and exit 130. With the server's own handler there, Ctrl-C ends the run with status 0
    # (and one that comes just before uvicorn takes over the signals stops the server as well).
    signal.signal(signal.SIGINT, server.handle_exit)
    server.run(sockets=[sock])  # the socket bound above
    if failures:
        sys.exit(f"acp-rest-bridge: {failures[0]}")
    if not server.started:
        sys.exit(3)
