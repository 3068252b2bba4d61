"""Pure ASGI middleware: CORS (outermost, answers every OPTIONS), token auth, encoded-path routing,
and the request body limit."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from app.errors import BridgeError, RequestFormatError, TokenInvalid

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

VARY = b"origin, access-control-request-method, access-control-request-headers"


class CORSMiddleware:
    """Legacy CORS (tower-http CorsLayer as the legacy server configured it, behavior §2.2)."""

    def __init__(
        self, app: ASGIApp, *, origins: list[str], methods: list[str], headers: list[str], credentials: bool
    ) -> None:
        self.app = app
        self.origins = set(origins)
        self.methods = ",".join(m.upper() for m in methods).encode() if methods else b"*"
        # Any header by default; with allowed origins, `authorization` is named too, because a `*`
        # does not cover it in most browsers (the inspector page sends the token from another origin).
        self.headers = (
            ",".join(h.lower() for h in headers).encode() if headers else b"*,authorization" if origins else b"*"
        )
        self.credentials = credentials

    def _common(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        origin = _header(scope, b"origin")
        if origin is not None and origin.decode("latin-1") in self.origins:
            out.append((b"access-control-allow-origin", origin))
        if self.credentials:
            out.append((b"access-control-allow-credentials", b"true"))
        out.append((b"vary", VARY))
        return out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        common = self._common(scope)
        if scope["method"] == "OPTIONS":
            headers = [
                *common,
                (b"access-control-allow-methods", self.methods),
                (b"access-control-allow-headers", self.headers),
                (b"content-length", b"0"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                existing = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"vary"]
                message["headers"] = existing + common
            await send(message)

        await self.app(scope, receive, send_with_cors)


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


class AuthMiddleware:
    def __init__(self, app: ASGIApp, *, token: str | None, on_error: Callable[[BridgeError], Any]) -> None:
        self.app = app
        self.token = token
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        public = path == "/v1/health" or not (path == "/v1" or path.startswith("/v1/"))
        if not public:
            auth = _header(scope, b"authorization")
            token = token_from_authorization(auth.decode("latin-1") if auth is not None else None)
            if token != self.token:
                response = self.on_error(TokenInvalid())
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class EncodedPathMiddleware:
    """Route on the still-encoded path, as the legacy server did, so ``%2F`` in a session id works.
    Path parameters are percent-decoded by the handlers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw:
                scope["path"] = raw.split(b"?", 1)[0].decode("latin-1")
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """413 for bodies over the limit: at once from Content-Length, or as soon as the stream passes it."""

    def __init__(self, app: ASGIApp, *, limit: int, on_error: Callable[[BridgeError], Any]) -> None:
        self.app = app
        self.limit = limit
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise PayloadTooLarge()
            return message

        await self.app(scope, counting_receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self.on_error(PayloadTooLarge())
        await response(scope, receive, send)


class PayloadTooLarge(RequestFormatError):
    def __init__(self) -> None:
        super().__init__("Failed to buffer the request body: length limit exceeded", 413)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None
