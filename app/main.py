"""``create_app(settings)`` and the ``acp-rest-bridge`` command line."""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from app import datadir, logs, settings_cli, startup
from app.acp.orphans import ProcessRegistry
from app.agents.acp_catalog import CatalogSource
from app.agents.node import OnDemandNode
from app.agents.registry import AgentRegistry, AgentsFileError
from app.events.log import trim_heap
from app.events.sqlite import SqliteBackend
from app.events.store import EventStore, StoreError
from app.events.writer import BatchWriter
from app.fs.paths import fence_for
from app.metrics import Metrics
from app.sessions import retention
from app.sessions.client_services import ClientServices
from app.sessions.manager import SessionManager
from app.settings import Settings
from app.tracing import Tracing, TracingUnavailable

if TYPE_CHECKING:
    from fastapi import FastAPI
    from prometheus_client.registry import CollectorRegistry

    from app.api.middleware import ASGIApp
    from app.sessions.fleet import Fleet
    from app.webhooks.dispatcher import WebhookDispatcher

VERSION = "0.1.0"
SHUTDOWN_GRACE = 2  # seconds (uvicorn takes whole seconds)


def open_webhooks(settings: Settings, store: EventStore, metrics: Metrics) -> WebhookDispatcher | None:
    """The webhook dispatcher and its outbox (beside the events: in the data dir, or a fleet's
    database), or None without a webhook URL."""
    if not settings.webhook_url:
        return None
    from app.webhooks.dispatcher import WebhookDispatcher, payload_of
    from app.webhooks.outbox import OutboxStore

    outbox: OutboxStore
    if settings.database_url:
        from app.events.postgres import PostgresBackend
        from app.sessions.fleet import advertised
        from app.webhooks.postgres_outbox import PostgresOutbox

        assert isinstance(store, BatchWriter) and isinstance(store.backend, PostgresBackend)
        outbox = PostgresOutbox(
            store,
            advertised(settings),
            list(dict.fromkeys(settings.webhook_url)),
            frozenset(settings.webhook_events),
            payload_of,
            # What a dead bridge left is looked for twice per lease: taken over soon after its lease ends.
            rescue_interval=max(settings.lease_seconds, 1.0) / 2,
        )
    else:
        from app.webhooks.sqlite_outbox import SqliteOutbox

        outbox = SqliteOutbox(settings.resolved_data_dir())
    return WebhookDispatcher(settings, store, outbox, metrics)


def open_store(settings: Settings) -> EventStore:
    """The durable event store: a PostgreSQL database (``database_url``) or SQLite in the data dir;
    it touches the database or the disk only when the server starts."""
    if settings.database_url:
        from app.events.postgres import PostgresBackend
        from app.sessions.fleet import advertised

        database = PostgresBackend(settings.database_url, name=f"acp-rest-bridge {advertised(settings)}")
        return BatchWriter(database, backlog_bytes=settings.event_backlog_bytes)
    return BatchWriter(SqliteBackend(settings.resolved_data_dir()), backlog_bytes=settings.event_backlog_bytes)


class Services:
    """Every service of the server, built here, once, from the settings, and handed on. Nothing of
    the HTTP layer: ``create_api`` builds that on top of them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # What GET /metrics reports: counted by the services below.
        self.metrics = Metrics()
        # Traces, when the OTEL_* environment asks for an exporter (None: off).
        self.tracing = Tracing.from_environment()
        cache_dir = settings.cache_dir()
        # Agent, terminal, install and clone process groups (and install and clone staging folders),
        # so the next server on the data dir can end and remove a crashed run's.
        self.processes = ProcessRegistry(settings.resolved_data_dir() / "processes")
        self.node = (
            OnDemandNode(cache_dir / "node", settings.install_timeout, self.processes)
            if settings.node_on_demand
            else None
        )
        self.registry = AgentRegistry(
            settings.agents_file,
            install_dir=cache_dir / "bin",
            install_timeout=settings.install_timeout,
            node=self.node,
            processes=self.processes,
            metrics=self.metrics,
            catalog=CatalogSource(settings.acp_registry_url, allow_http=settings.registry_allow_http),
        )
        self.store = open_store(settings)
        if isinstance(self.store, BatchWriter):
            self.store.commit_observer = self.metrics.events_written
        # What the bridge answers when an agent asks (permissions, files, terminals...).
        self.client_services = ClientServices()
        # Webhooks, when a URL is set: every committed event goes by the dispatcher.
        self.webhooks = open_webhooks(settings, self.store, self.metrics)
        self.manager = SessionManager(
            settings,
            self.registry,
            self.store,
            self.client_services,
            self.processes,
            metrics=self.metrics,
            tracing=self.tracing,
            on_event=None if self.webhooks is None else self.webhooks.observe,
        )
        self.fleet: Fleet | None = None
        if settings.database_url:
            from app.events.postgres import PostgresBackend
            from app.sessions.fleet import Fleet

            assert isinstance(self.store, BatchWriter) and isinstance(self.store.backend, PostgresBackend)
            # Bridges on one database: every one lists and serves every session (app/sessions/fleet.py).
            self.fleet = self.manager.fleet = Fleet(settings, self.store, self.manager)
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
        webhooks = self.webhooks
        try:
            if webhooks is not None:
                await webhooks.open()  # what an earlier run did not deliver
            # The data dir is this server's now: end what an earlier run left alive.
            await asyncio.to_thread(processes.sweep)
            # ... and the temporary files its interrupted writes and uploads left in users' directories.
            await asyncio.to_thread(fence_for(settings).temps.sweep)
            processes.open()
            fleet = self.fleet
            if fleet is not None:
                await asyncio.to_thread(fleet.join)  # (done already when started from the command line)
            manager.restore(await fleet.runners() if fleet is not None else None)
            await manager.settle_restored()
            if fleet is not None:
                fleet.start()
            if webhooks is not None:
                # (In a fleet the outbox catches up with the sessions this bridge runs; the others'
                # runners, or whoever takes over from a dead one, keep theirs.)
                webhooks.start([s.id for s in manager.list()], [s.id for s in manager.local()])
            if settings.retention_days > 0:
                pruning = asyncio.create_task(retention.run(manager, settings.retention_days), name="retention")
            # (The ACP registry's catalog is fetched when first needed: GET /v1/agents, a create.)
            yield
        finally:
            if pruning is not None:
                pruning.cancel()
            self.registry.stop_refresh()
            if self.registry.installs is not None:
                await self.registry.installs.shutdown()
            await manager.shutdown()
            if self.fleet is not None:
                await self.fleet.stop()
            if webhooks is not None:
                await webhooks.close()  # what is not delivered stays in the outbox
            processes.close()
            store.close()  # commits every event still queued
            if self.tracing is not None:
                await asyncio.to_thread(self.tracing.shutdown)  # the spans not exported yet
            datadir.remove(settings)


def settle_memory() -> None:
    """What is loaded by now (FastAPI, the routers and models, the ACP SDK) lives as long as the
    server; keeping it out of the collector makes every full collection during an agent's burst
    that much cheaper, and what start-up freed goes back to the system."""
    gc.collect()
    gc.freeze()
    trim_heap()


def middleware_options(services: Services) -> dict[str, Any]:
    """The settings of the one pure ASGI layer (``BridgeMiddleware``)."""
    settings = services.settings
    return {
        "metrics": services.metrics,
        "tracing": services.tracing,
        "token": settings.token,
        "body_limit": settings.body_limit,
        "cors_origins": settings.cors_allow_origin,
        "cors_methods": settings.cors_allow_method,
        "cors_headers": settings.cors_allow_header,
        "cors_credentials": settings.cors_allow_credentials,
        "bound_host": settings.host,
        "allowed_hosts": allowed_hosts(settings),
    }


def allowed_hosts(settings: Settings) -> list[str]:
    """The hosts served without a token: in a fleet also the name this bridge advertises, which
    the others' forwarded requests carry as ``Host``."""
    if not settings.database_url:
        return settings.allowed_hosts
    import httpx

    from app.sessions.fleet import advertised

    return [*settings.allowed_hosts, httpx.URL(advertised(settings)).host]


def metrics_registry(services: Services) -> Callable[[], CollectorRegistry]:
    """The server's own Prometheus registry (never the library's global one), made at the first
    scrape: prometheus_client is imported only when someone asks."""

    @functools.cache
    def registry() -> CollectorRegistry:
        from prometheus_client.registry import CollectorRegistry

        from app.api.metrics import BridgeCollector

        registry = CollectorRegistry(auto_describe=False)
        webhooks = services.webhooks
        queue = None if webhooks is None else (lambda: webhooks.queue_depth)
        registry.register(BridgeCollector(services.metrics, services.manager, services.store, queue))
        return registry

    return registry


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
        metrics,
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
        docs_url=None,  # /docs only with ACP_BRIDGE_DOCS, its assets from a package (api/docs.py)
        redoc_url=None,
        openapi_url=None,  # served by api/openapi.py, rendered once
        redirect_slashes=False,  # legacy: no trailing-slash tolerance
        **fastapi_options.app_options(),
    )
    app.state.settings = services.settings
    app.state.registry = services.registry
    app.state.manager = services.manager
    app.state.store = services.store
    app.state.metrics_registry = metrics_registry(services)
    app.state.stopping = lambda: services.stopping()
    problems.install(app)
    openapi.install(app)
    routing.include(app, [r.router for r in (health, agents, sessions, events, permissions, questions, fs, metrics)])
    ui.install(app)
    if services.settings.docs:
        from app.api import docs

        docs.install(app)

    async def server_info(request: Request) -> Response:
        return PlainTextResponse(problems.SERVER_INFO)

    # A plain route: FastAPI would read its annotations in this module's namespace, not this function's.
    app.add_route("/", server_info, methods=["GET"], include_in_schema=False)

    # One pure ASGI layer: CORS (answers every OPTIONS) -> auth -> body limit -> encoded-path routing.
    app.add_middleware(
        BridgeMiddleware,
        on_error=problems.problem_response,
        direct=routing.DirectRoutes(app),
        **middleware_options(services),
    )
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
        from app.api import fastapi_options, problems, routing

        app = create_api(services)
        served: ASGIApp = app
        if fastapi_options.native_telemetry_off():
            # The middleware in front of the whole application, serving its direct routes itself:
            # a request to one of them passes none of the layers of FastAPI and Starlette (the
            # application's own middleware then lets the others pass, checked once).
            served = BridgeMiddleware(
                app,
                on_error=problems.problem_response,
                direct=routing.DirectRoutes(app),
                **middleware_options(services),
            )
        settle_memory()
        return served

    def early(inner: ASGIApp) -> ASGIApp:
        return BridgeMiddleware(
            inner,
            on_error=startup.problem_app,
            **middleware_options(services),
        )

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
    settings_cli.add_flags(server)  # one per setting that has flags, made from its description

    export = sub.add_parser("openapi", help="print the OpenAPI document this server serves")
    export.add_argument("--out", type=Path, help="write to this file instead of stdout")

    sub.add_parser("settings", help="print the table of server options (as in docs/configuration.md)")
    return parser


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
        sys.stdout.write(settings_cli.render())
        return
    try:
        settings = settings_cli.from_args(args)
    except ValidationError as exc:
        sys.exit(f"acp-rest-bridge: {settings_cli.error_line(exc)}")
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
    if settings.docs:
        from app.api import docs

        missing = docs.missing()
        if missing:
            sys.exit(f"acp-rest-bridge: {missing}")
    from app import serving

    open_files = serving.raise_open_file_limit()
    limits = serving.ConnectionLimits(
        serving.connection_cap(settings.max_connections, open_files),
        settings.header_timeout,
        settings.body_timeout,
        settings.write_timeout,
        max(1, settings.pipeline_limit),
    )
    config_errors: tuple[type[BaseException], ...] = (
        AgentsFileError,
        StoreError,
        startup.StartError,
        OSError,
        TracingUnavailable,
    )
    if settings.webhook_url:  # (nothing of webhooks is loaded without one)
        from app.webhooks.outbox import WebhookConfigError

        config_errors += (WebhookConfigError,)
    try:
        services = Services(settings)
        datadir.prepare(settings)
        services.store.open()  # here, so a locked or unusable data dir is a one-line error
        if services.fleet is not None:
            services.fleet.join()  # ... and so is a conflict with another bridge of the fleet
        sock = startup.listen(settings.host, settings.port)
    except config_errors as exc:
        datadir.remove(settings)
        sys.exit(f"acp-rest-bridge: {exc}")
    print(logs.line(startup.startup_line(settings, services.registry, sock), settings.log_format), file=sys.stderr)
    warning = startup.open_api_warning(settings)
    if warning:
        print(logs.line(warning, settings.log_format, "warning"), file=sys.stderr, flush=True)
    sys.stderr.flush()
    import uvicorn

    # The bridge's own records (and the ACP SDK's, which go to the root logger) at the chosen level;
    # as JSON lines, uvicorn's too (it then configures no handlers of its own).
    logs.configure(settings.log_level, settings.log_format)
    json_logs = settings.log_format == "json"
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
        # As JSON lines, uvicorn's records go to the root logger's handler.
        log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        # httptools with deadlines for request heads and bodies and a cap on connections.
        http=serving.protocol_class(serving.Connections(limits, trim_heap)),
    )
    server = uvicorn.Server(config)
    services.stopping = lambda: server.should_exit
    # uvicorn stops gracefully on SIGTERM and SIGINT, then raises the signal again with the handler
    # that was there before it ran: Python's defaults would then end the process by SIGTERM (status
    # 143, as if killed) or print a KeyboardInterrupt traceback and exit 130. With the server's own
    # handler there, a clean stop (docker stop, a service manager, Ctrl-C) exits with status 0 (and a
    # signal that comes just before uvicorn takes over the signals stops the server as well).
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, server.handle_exit)
    server.run(sockets=[sock])  # the socket bound above
    if failures:
        sys.exit(f"acp-rest-bridge: {failures[0]}")
    if not server.started:
        sys.exit(3)
