"""What the server does when it starts: the listening socket (bound before anything is served, so a
port in use is a one-line error), the start-up line, the warning about an open API, and ``Front``,
the ASGI application that answers ``GET /v1/health`` while the HTTP application is being built."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import traceback
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any

from app.errors import BridgeError, ServiceUnavailable

if TYPE_CHECKING:
    from app.agents.registry import AgentRegistry
    from app.api.middleware import ASGIApp, Receive, Scope, Send
    from app.settings import Settings

log = logging.getLogger("acp_rest_bridge.startup")

# Longest a request waits for the HTTP application to be built (it takes well under a second).
APP_WAIT = 30.0


class StartError(Exception):
    """The server cannot start; the message is its one-line reason."""


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound (uvicorn listens on it)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise StartError(f"cannot listen on {host}:{port}: {exc}") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StartError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def startup_line(settings: Settings, registry: AgentRegistry, sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    data_dir = str(settings.resolved_data_dir())
    if settings.database_url:
        from app.events.postgres import redacted
        from app.sessions.fleet import advertised

        data_dir += f"; events in {redacted(settings.database_url)}, shared as {advertised(settings)}"
        if not settings.advertise_url:
            data_dir += " (set --advertise-url to the address the other bridges reach this one at)"
    elif settings.private_data_dir:
        data_dir += " (private to this run: set --data-dir to keep sessions)"
    agents = ", ".join(spec.id if spec.installed else f"{spec.id} (not installed)" for spec in registry.configured())
    listed = len(registry.catalog_agents())
    if listed:
        agents += f" (+{listed} from the ACP registry)"
    return (
        f"acp-rest-bridge listening on {url}; data dir {data_dir}; "
        f"auth {'on' if settings.token else 'off'}; agents file {settings.agents_file or 'none'}; agents: {agents}"
    )


def open_api_warning(settings: Settings) -> str | None:
    if settings.token or is_loopback(settings.host):
        return None
    return (
        f"WARNING: no token is set and the server listens on {settings.host}: anyone who reaches this port "
        "can run agents and read and write files. Set ACP_BRIDGE_TOKEN (or --token)."
    )


# ---- the front layer ----------------------------------------------------------------------------
def _json_app(status: int, body: Any) -> ASGIApp:
    """A JSON answer, byte for byte as the HTTP application's (Starlette's ``JSONResponse``)."""
    data = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": data})

    return answer


def problem_app(error: BridgeError) -> ASGIApp:
    """The legacy ProblemDetails answer of ``error`` (as ``app.api.problems.problem_response``)."""
    return _json_app(error.status, error.problem())


HEALTHY = _json_app(200, {"status": "ok"})


def _is_health(scope: Scope) -> bool:
    """``GET`` (or ``HEAD``) ``/v1/health``, matched on the still-encoded path as the HTTP
    application routes it."""
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return False
    raw = scope.get("raw_path")
    path = raw.split(b"?", 1)[0].decode("latin-1") if raw else scope["path"]
    return bool(path == "/v1/health")


class Front:
    """The ASGI application the server runs.

    Its lifespan starts the services (data dir, store, what an earlier run left, the sessions):
    once they run, ``GET /v1/health`` is answered here, and the HTTP application (FastAPI: routers,
    legacy models, OpenAPI) is built right away in a thread, since importing it takes most of a
    cold start. Every other request waits for it (up to ``APP_WAIT`` seconds, then 503) and is
    then served by it; once it is built, every request, health included, goes to it. A build that
    fails is reported through ``on_failure`` (the server stops and says why) and answered 503.
    """

    def __init__(
        self,
        running: Callable[[], AbstractAsyncContextManager[None]],
        build: Callable[[], ASGIApp],
        early: Callable[[ASGIApp], ASGIApp],
        on_failure: Callable[[str], None],
        wait: float = APP_WAIT,
    ) -> None:
        self.running = running
        self.build = build
        self.on_failure = on_failure
        self.wait = wait
        self.app: ASGIApp | None = None
        self.failure: str | None = None
        self._built = asyncio.Event()
        self._build_task: asyncio.Task[None] | None = None
        # Health and the 503s go through the same CORS/auth layer as the application's answers.
        self.early = early(self._early)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        app = self.app
        if app is None and not _is_health(scope):
            await self._wait_built()
            app = self.app
        await (app or self.early)(scope, receive, send)

    async def _wait_built(self) -> None:
        try:
            await asyncio.wait_for(self._built.wait(), self.wait)
        except TimeoutError:
            pass

    async def _early(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _is_health(scope):
            await HEALTHY(scope, receive, send)
            return
        reason = self.failure or "the server is still starting"
        await problem_app(ServiceUnavailable(reason))(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(self.running())
        except BaseException:
            await send({"type": "lifespan.startup.failed", "message": traceback.format_exc()})
            raise
        self._build_task = asyncio.create_task(self._build(), name="build-app")
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await stack.aclose()
        except BaseException:
            await send({"type": "lifespan.shutdown.failed", "message": traceback.format_exc()})
            raise
        await send({"type": "lifespan.shutdown.complete"})

    async def _build(self) -> None:
        try:
            self.app = await asyncio.to_thread(self.build)
        except Exception as exc:
            log.error("building the HTTP application failed", exc_info=True)
            self.failure = f"cannot build the HTTP application: {type(exc).__name__}: {exc}"
            self.on_failure(self.failure)
        finally:
            self._built.set()
