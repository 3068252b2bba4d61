"""The bridge's HTTP middleware: one pure ASGI layer for legacy CORS (answers every OPTIONS), the
rules of a server without a token (``sites.py``), token auth, the request body limit, HEAD as GET
without a body, and routing on the still-encoded path.

One layer, one pass over the headers, and everything that depends only on the settings decided
once: a request costs a few attribute reads here, not four wrappers (behavior §2.2 for CORS).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from app.api.sites import SAFE_METHODS, SiteRules
from app.errors import BridgeError, ForeignRequest, RequestFormatError, TokenInvalid
from app.metrics import Metrics
from app.tracing import Tracing

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

VARY = (b"vary", b"origin, access-control-request-method, access-control-request-headers")
# The scope extension through which the server (app/serving.py) offers to close the connection at
# once, dropping what is still queued for it: a callable, absent under other servers.
ABORT_EXTENSION = "acp-rest-bridge.abort"
# Set in a request's scope once a ``BridgeMiddleware`` has checked it: another one further in (the
# application's own, under the one the server puts in front of it) passes it straight on.
CHECKED = "acp-rest-bridge.checked"


def is_public(path: str) -> bool:
    """Paths served without a token: ``GET /v1/health`` and everything outside ``/v1`` but
    ``/metrics``. Extend here (one place) when a public path is added under /v1."""
    return path == "/v1/health" or not (path == "/v1" or path.startswith("/v1/") or path == "/metrics")


class DirectRouter(Protocol):
    """Routes the application lets the middleware serve itself (``routing.DirectRoutes``)."""

    def find(self, scope: Scope) -> Any: ...

    async def serve(self, route: Any, scope: Scope, receive: Receive, send: Send) -> None: ...


class BridgeMiddleware:
    """Order seen by a request: without a token, the site rules (``Host``; for state-changing
    requests ``Origin``/``Sec-Fetch-Site``) -> CORS (answers every OPTIONS) -> auth -> body limit ->
    encoded-path routing -> the app. Error answers (401, 403, 413) carry the CORS headers too.
    The first of repeated ``Authorization``, ``Origin`` or ``Host`` headers counts, as legacy."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        body_limit: int,
        on_error: Callable[[BridgeError], Any],
        cors_origins: list[str],
        cors_methods: list[str],
        cors_headers: list[str],
        cors_credentials: bool,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        bound_host: str = "127.0.0.1",
        allowed_hosts: list[str] | None = None,
        direct: DirectRouter | None = None,
    ) -> None:
        self.app = app
        # The application's routes served here, without the layers between (``routing.DirectRoutes``).
        self.direct = direct
        self.metrics = metrics
        self.tracing = tracing
        self.token = None if token is None else token.encode()
        # With a token, the token decides, as legacy; without one, who may drive the server.
        self.sites = SiteRules(bound_host, allowed_hosts or [], cors_origins) if token is None else None
        self._hosts: dict[tuple[bytes, str | None], bool] = {}
        self.limit = body_limit
        self.on_error = on_error
        self.origins = {origin.encode("latin-1") for origin in cors_origins}
        self.credentials = [(b"access-control-allow-credentials", b"true")] if cors_credentials else []
        # What every response gets when the request's origin is not allowed (or there is none).
        self.common = [*self.credentials, VARY]
        methods = ",".join(m.upper() for m in cors_methods).encode() if cors_methods else b"*"
        # Any header by default; with allowed origins, `authorization` is named too, because a `*`
        # does not cover it in most browsers (the inspector page sends the token from another origin).
        if cors_headers:
            headers = ",".join(h.lower() for h in cors_headers).encode()
        else:
            headers = b"*,authorization" if cors_origins else b"*"
        self.preflight = [
            (b"access-control-allow-methods", methods),
            (b"access-control-allow-headers", headers),
            (b"content-length", b"0"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or CHECKED in scope:
            await self.app(scope, receive, send)
            return
        metrics = self.metrics
        if metrics is None and self.tracing is None:
            await self._serve(scope, receive, send)
            return
        if self.tracing is None:
            await self._measured(scope, receive, send, metrics, None)
            return
        with self.tracing.server_span(scope["method"], scope["headers"]) as span:
            await self._measured(scope, receive, send, metrics, span)

    async def _measured(self, scope: Scope, receive: Receive, send: Send, metrics: Metrics | None, span: Any) -> None:
        """Counted by route template (the matched route's path; FastAPI leaves it in the scope),
        method and status; the duration is until the app returns (a stream's whole length)."""
        start = time.perf_counter()
        seen: list[int] = []  # the response's status, once started
        try:
            await self._serve(scope, receive, send, seen)
        finally:
            status = seen[0] if seen else 500
            route = scope.get("route")
            template = getattr(route, "path", None) or ("unmatched" if status == 404 else "other")
            if metrics is not None:
                metrics.http_request(template, scope["method"], status, time.perf_counter() - start)
            if span is not None:
                span.update_name(f"{scope['method']} {template}")
                span.set_attribute("http.request.method", scope["method"])
                span.set_attribute("http.route", template)
                span.set_attribute("url.path", scope["path"])
                span.set_attribute("http.response.status_code", status)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, seen: list[int] | None = None) -> None:
        origin = authorization = length = host = fetch_site = None
        chunked = False
        for key, value in scope["headers"]:
            key = key.lower()
            if key == b"origin":
                if origin is None:
                    origin = value
            elif key == b"authorization":
                if authorization is None:  # the first one counts, as legacy
                    authorization = value
            elif key == b"content-length":
                length = value
            elif key == b"transfer-encoding":
                chunked = True
            elif key == b"host":
                if host is None:
                    host = value
            elif key == b"sec-fetch-site":
                fetch_site = value
        common = self.common
        if origin is not None and bytes(origin) in self.origins:
            common = [(b"access-control-allow-origin", bytes(origin)), *common]

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                if seen is not None:
                    seen.append(message["status"])
                headers = message.get("headers") or []
                message["headers"] = [h for h in headers if h[0].lower() != b"vary"] + common
            await send(message)

        if self.sites is not None:
            refusal = self._refusal(scope, host, origin, fetch_site)
            if refusal is not None:
                await self.on_error(refusal)(scope, receive, send_with_cors)
                return

        if scope["method"] == "OPTIONS":
            if seen is not None:
                seen.append(200)
            await send({"type": "http.response.start", "status": 200, "headers": common + self.preflight})
            await send({"type": "http.response.body", "body": b""})
            return

        if self.token is not None and not is_public(scope["path"]):
            token = token_from_authorization(None if authorization is None else bytes(authorization).decode("latin-1"))
            if token is None or not hmac.compare_digest(token.encode(), self.token):
                await self.on_error(TokenInvalid())(scope, receive, send_with_cors)
                return

        if length is not None and length.isdigit() and int(length) > self.limit:
            await self.on_error(PayloadTooLarge(self.limit))(scope, receive, send_with_cors)
            return
        if chunked:
            receive = self._counting(receive)

        # Route on the still-encoded path, as the legacy server did, so `%2F` in a session id
        # works; path parameters are percent-decoded by the handlers.
        raw = scope.get("raw_path")
        if raw:
            scope["path"] = raw.split(b"?", 1)[0].decode("latin-1")
        scope[CHECKED] = True
        if scope["method"] == "HEAD":
            await head_as_get(self.app, scope, receive, send_with_cors)
            return
        direct = self.direct
        if direct is not None:
            route = direct.find(scope)
            if route is not None:
                await direct.serve(route, scope, receive, send_with_cors)
                return
        await self.app(scope, receive, send_with_cors)

    def _refusal(self, scope: Scope, host: Any, origin: Any, fetch_site: Any) -> BridgeError | None:
        """Why a server without a token refuses this request, or None."""
        sites = self.sites
        assert sites is not None
        host_text = None if host is None else bytes(host).decode("latin-1")
        # No Host at all (HTTP/1.0) is no browser's request; a browser always sends one.
        if host is not None:
            server = scope.get("server")
            local = server[0] if server else None
            key = (bytes(host), local)
            allowed = self._hosts.get(key)
            if allowed is None:
                allowed = sites.host_allowed(host_text or "", local)
                if len(self._hosts) >= 256:  # any number of names may be tried: keep few
                    self._hosts.clear()
                self._hosts[key] = allowed
            if not allowed:
                return ForeignRequest(
                    f"Host {(host_text or '')[:200]!r} is not served without a token",
                    "only loopback names, the bound address and ACP_BRIDGE_ALLOWED_HOSTS are; "
                    "add the name there or set a token (--token)",
                )
        if scope["method"] in SAFE_METHODS:
            return None
        why = sites.cross_site(
            host_text,
            None if origin is None else bytes(origin).decode("latin-1"),
            None if fetch_site is None else bytes(fetch_site).decode("latin-1"),
        )
        if why is None:
            return None
        return ForeignRequest(
            f"cross-site request refused: {why}",
            "without a token, state-changing requests are taken only from this server's own pages, "
            "origins allowed with --cors-allow-origin, and clients that are not browsers; or set a token (--token)",
        )

    def _counting(self, receive: Receive) -> Receive:
        """A chunked body: 413 as soon as it passes the limit (with a Content-Length the server
        itself reads no more than that)."""
        seen = 0
        limit = self.limit

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(limit)
            return message

        return counting_receive


async def head_as_get(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """HEAD on any route answers as GET does, without the body, as legacy did (HEAD-based health
    checks). The app sees a GET (a copy of the scope: the server's own still says HEAD, so it sends
    no body either); once the headers are out the response is complete, and a streaming answer
    (SSE) is told the client has left, so it ends."""
    scope = {**scope, "method": "GET"}
    answered = asyncio.Event()

    async def send_head(message: Message) -> None:
        if message["type"] == "http.response.start":
            await send(message)
        elif message["type"] == "http.response.body" and not answered.is_set():
            answered.set()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def receive_head() -> Message:
        if answered.is_set():
            return {"type": "http.disconnect"}
        message = asyncio.ensure_future(receive())
        done = asyncio.ensure_future(answered.wait())
        try:
            await asyncio.wait((message, done), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (message, done):
                if not waiter.done():
                    waiter.cancel()
        return message.result() if message.done() and not message.cancelled() else {"type": "http.disconnect"}

    await app(scope, receive_head, send_head)


def token_from_authorization(value: str | None) -> str | None:
    """Bearer <t>, Token <t>, or Basic base64(user:token | token); anything else: no token."""
    if not value:
        return None
    value = value.strip()
    scheme, _, rest = value.partition(" ")
    scheme = scheme.lower()
    rest = rest.strip()
    if scheme in ("bearer", "token"):
        return rest or None
    if scheme == "basic" and rest:
        decoded = None
        for decoder in (base64.b64decode, base64.urlsafe_b64decode):
            for padded in (rest, rest + "=" * (-len(rest) % 4)):
                try:
                    decoded = decoder(padded.encode("ascii")).decode("utf-8")
                    break
                except (binascii.Error, ValueError, UnicodeError):
                    continue
            if decoded is not None:
                break
        if not decoded:
            return None
        if ":" in decoded:
            return decoded.split(":", 1)[1]
        return decoded
    return None


# The setting of the body limit (app/settings.py: body_limit), named in the 413.
BODY_LIMIT_SETTING = "ACP_BRIDGE_BODY_LIMIT"


class PayloadTooLarge(RequestFormatError):
    """413, legacy's words first, then the limit and the setting that raises it (also as the
    ``details`` extension: ``limit`` in bytes, ``setting``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "Failed to buffer the request body: length limit exceeded "
            f"(this server takes bodies up to {readable_size(limit)}, {limit} bytes; {BODY_LIMIT_SETTING} sets it)",
            413,
        )
        self.details = {"limit": limit, "setting": BODY_LIMIT_SETTING}


def readable_size(size: int) -> str:
    """2097152 -> '2 MiB', 1536 -> '1.5 KiB', 100 -> '100 bytes'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"
