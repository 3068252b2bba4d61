"""The bridge's HTTP middleware: one pure ASGI layer for legacy CORS (answers every OPTIONS), token
auth, the request body limit, HEAD as GET without a body, and routing on the still-encoded path.

One layer, one pass over the headers, and everything that depends only on the settings decided
once: a request costs a few attribute reads here, not four wrappers (behavior §2.2 for CORS).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from app.errors import BridgeError, RequestFormatError, TokenInvalid

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

VARY = (b"vary", b"origin, access-control-request-method, access-control-request-headers")


def is_public(path: str) -> bool:
    """Paths served without a token: ``GET /v1/health`` and everything outside ``/v1``.
    Extend here (one place) when a public path is added under /v1."""
    return path == "/v1/health" or not (path == "/v1" or path.startswith("/v1/"))


class BridgeMiddleware:
    """Order seen by a request: CORS (answers every OPTIONS) -> auth -> body limit -> encoded-path
    routing -> the app. Error answers (401, 413) carry the CORS headers too."""

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
    ) -> None:
        self.app = app
        self.token = None if token is None else token.encode()
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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = authorization = length = None
        chunked = False
        for key, value in scope["headers"]:
            key = key.lower()
            if key == b"origin":
                origin = value
            elif key == b"authorization":
                authorization = value
            elif key == b"content-length":
                length = value
            elif key == b"transfer-encoding":
                chunked = True
        common = self.common
        if origin is not None and bytes(origin) in self.origins:
            common = [(b"access-control-allow-origin", bytes(origin)), *common]

        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 200, "headers": common + self.preflight})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers") or []
                message["headers"] = [h for h in headers if h[0].lower() != b"vary"] + common
            await send(message)

        if self.token is not None and not is_public(scope["path"]):
            token = token_from_authorization(None if authorization is None else bytes(authorization).decode("latin-1"))
            if token is None or not hmac.compare_digest(token.encode(), self.token):
                await self.on_error(TokenInvalid())(scope, receive, send_with_cors)
                return

        if length is not None and length.isdigit() and int(length) > self.limit:
            await self.on_error(PayloadTooLarge())(scope, receive, send_with_cors)
            return
        if chunked:
            receive = self._counting(receive)

        # Route on the still-encoded path, as the legacy server did, so `%2F` in a session id
        # works; path parameters are percent-decoded by the handlers.
        raw = scope.get("raw_path")
        if raw:
            scope["path"] = raw.split(b"?", 1)[0].decode("latin-1")
        if scope["method"] == "HEAD":
            await head_as_get(self.app, scope, receive, send_with_cors)
            return
        await self.app(scope, receive, send_with_cors)

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
                    raise PayloadTooLarge()
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


class PayloadTooLarge(RequestFormatError):
    def __init__(self) -> None:
        super().__init__("Failed to buffer the request body: length limit exceeded", 413)
