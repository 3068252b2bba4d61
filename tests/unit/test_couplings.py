"""The register of third-party couplings (ARCHITECTURE.md, "Couplings"): for each place where the
bridge relies on a library beyond its documented use, the members it uses exist with the signature
it calls them with, and they behave as it relies on. A new release that changes one fails here,
naming it (``.ci/run`` runs this module on the newest releases of the coupled packages too)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import JSONResponse, Response

from app.api.routing import BridgeRoute
from tests.support import wait_until_async

Message = MutableMapping[str, Any]


def parameters(function: Callable[..., Any]) -> list[str]:
    """The parameter names of ``function`` (``self`` included), in order."""
    return list(inspect.signature(function).parameters)


def accepts(function: Callable[..., Any], *names: str) -> None:
    """``function`` takes these keyword arguments (or any, through ``**kwargs``)."""
    found = inspect.signature(function).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in found.values()):
        return
    missing = [name for name in names if name not in found]
    assert not missing, f"{function.__qualname__} no longer takes {missing}"


# ---- uvicorn: the httptools protocol that app/serving.py extends ---------------------------------
# The methods GuardedHttpTools overrides, with the parameters uvicorn and httptools call them with.
OVERRIDDEN = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "on_message_begin": ["self"],
    "on_headers_complete": ["self"],
    "on_body": ["self", "body"],
    "on_message_complete": ["self"],
    "pause_writing": ["self"],
    "resume_writing": ["self"],
    "on_response_complete": ["self"],
}


def test_uvicorn_httptools_protocol_has_the_methods_the_bridge_overrides() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from app.serving import GuardedHttpTools

    for name, expected in OVERRIDDEN.items():
        assert parameters(getattr(HttpToolsProtocol, name)) == expected, f"HttpToolsProtocol.{name}"
        assert name in GuardedHttpTools.__dict__  # the register lists what the bridge really overrides
    overridden = {
        name
        for name, member in GuardedHttpTools.__dict__.items()
        if callable(member) and not name.startswith("_") and hasattr(HttpToolsProtocol, name)
    }
    assert overridden == set(OVERRIDDEN), "update OVERRIDDEN and ARCHITECTURE.md's register"
    # uvicorn makes the protocol itself (Server.startup: the class given as ``http``).
    assert parameters(HttpToolsProtocol.__init__)[:4] == ["self", "config", "server_state", "app_state"]


def test_uvicorn_takes_a_protocol_class_and_instance_attributes_are_as_read() -> None:
    import uvicorn
    from uvicorn.protocols.http.flow_control import FlowControl

    from app.serving import ConnectionLimits, Connections, protocol_class

    cls = protocol_class(Connections(ConnectionLimits(10, 1.0, 1.0)))
    config = uvicorn.Config(_ok_app, http=cls, lifespan="off", log_config=None)
    config.load()
    assert config.http_protocol_class is cls
    accepts(
        uvicorn.Config.__init__,
        "host",
        "port",
        "log_level",
        "access_log",
        "ws",
        "lifespan",
        "timeout_graceful_shutdown",
        "log_config",
        "http",
    )
    assert isinstance(uvicorn.config.LOGGING_CONFIG, dict)
    assert parameters(uvicorn.Server.run) == ["self", "sockets"]
    assert parameters(uvicorn.Server.handle_exit) == ["self", "sig", "frame"]  # a signal handler
    flow = FlowControl(_NullTransport())  # type: ignore[arg-type]
    assert flow.read_paused is False and flow.write_paused is False and callable(flow.pause_reading)


class _NullTransport:
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


async def _ok_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class _Served:
    """A real uvicorn ``Server`` in this event loop, on the bridge's protocol class (recording the
    hooks uvicorn calls and what they see), serving ``app``."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        from app.serving import ConnectionLimits, Connections, protocol_class

        self.calls: list[str] = []
        self.protocols: list[Any] = []
        self.writes: list[bytes] = []  # what reached the socket's transport, write by write
        calls, protocols, writes = self.calls, self.protocols, self.writes

        class Writes:
            """The loop's transport, its writes recorded."""

            def __init__(self, transport: asyncio.Transport) -> None:
                self.transport = transport

            def write(self, data: bytes) -> None:
                writes.append(bytes(data))
                self.transport.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.transport, name)

        base = protocol_class(Connections(ConnectionLimits(16, 5.0, 5.0, 5.0, 4)))

        class Recording(base):  # type: ignore[valid-type, misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                protocols.append(self)

            def connection_made(self, transport: asyncio.Transport) -> None:
                calls.append("connection_made")
                super().connection_made(Writes(transport))

            def on_message_begin(self) -> None:
                calls.append("on_message_begin")
                super().on_message_begin()

            def on_headers_complete(self) -> None:
                calls.append(f"on_headers_complete pipeline={len(self.pipeline)}")
                super().on_headers_complete()
                # uvicorn hands the cycle the protocol's own on_response_complete: overriding it works.
                assert self.cycle.on_response == self.on_response_complete

            def on_message_complete(self) -> None:
                calls.append("on_message_complete")
                super().on_message_complete()

            def on_response_complete(self) -> None:
                calls.append(f"on_response_complete pipeline={len(self.pipeline)}")
                super().on_response_complete()

            def connection_lost(self, exc: Exception | None) -> None:
                calls.append("connection_lost")
                super().connection_lost(exc)

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, http=Recording, lifespan="off", log_config=None, access_log=False, ws="none")
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Served:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        assert await wait_until_async(lambda: self.server.started, 10), "uvicorn did not start"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.should_exit = True  # what the SSE streams read to end (app/api/sse.py)
        assert self.task is not None
        async with asyncio.timeout(10):
            await self.task
        self.sock.close()

    async def exchange(self, data: bytes, done: Callable[[bytes], bool]) -> bytes:
        """Send ``data`` on a new connection; read until what came is ``done``, then close."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        got = b""
        try:
            writer.write(data)
            async with asyncio.timeout(10):
                while not done(got):
                    chunk = await reader.read(65536)
                    assert chunk, f"the connection closed after {got!r}"
                    got += chunk
        finally:
            writer.close()
        return got


async def test_uvicorn_calls_the_protocol_hooks_as_the_bridge_relies_on() -> None:
    from app.api.middleware import ABORT_EXTENSION

    seen: list[Any] = []
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope.get("extensions", {}).get(ABORT_EXTENSION))
        if scope["path"] == "/slow":
            await release.wait()
        await _ok_app(scope, receive, send)

    async with _Served(app) as served:
        pipelined = b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n"
        exchange = asyncio.create_task(served.exchange(pipelined, lambda got: got.count(b"\r\n\r\nok") == 2))
        assert await wait_until_async(lambda: served.calls.count("on_message_complete") == 2, 10)
        # The second request waits in uvicorn's ``pipeline`` until the first is answered.
        protocol = served.protocols[0]
        assert len(protocol.pipeline) == 1 and protocol.flow.read_paused
        assert protocol.cycle is not None and protocol.cycle.response_complete is False
        assert protocol.cycle.waiting_for_100_continue is False
        release.set()
        answer = await exchange
    assert answer.count(b"HTTP/1.1 200") == 2
    assert served.calls[:7] == [
        "connection_made",
        "on_message_begin",
        "on_headers_complete pipeline=0",
        "on_message_complete",
        "on_message_begin",
        "on_headers_complete pipeline=0",
        "on_message_complete",
    ]
    assert "on_response_complete pipeline=1" in served.calls  # the first answer starts the queued request
    assert all(callable(abort) for abort in seen)  # the scope uvicorn made carries the bridge's extension


async def test_uvicorn_writes_through_the_protocols_transport_which_makes_a_pass_one_write() -> None:
    """serving.CoalescingTransport: uvicorn takes the transport the protocol hands it in
    ``connection_made`` (``self.transport``, its cycles' too) and writes only through it, head and
    body parts apart; what one pass of the loop writes reaches the socket as one write, an answer's
    end at once (``on_response_complete``), in order."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"one", "more_body": True})
            await asyncio.sleep(0.05)  # a later pass
            await send({"type": "http.response.body", "body": b"two", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await _ok_app(scope, receive, send)

    async with _Served(app) as served:
        answer = await served.exchange(b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n", lambda got: got.endswith(b"ok"))
        assert answer.startswith(b"HTTP/1.1 200") and len(served.writes) == 1  # head and body: one write
        served.writes.clear()
        streamed = await served.exchange(
            b"GET /stream HTTP/1.1\r\nHost: a\r\n\r\n", lambda got: got.endswith(b"0\r\n\r\n")
        )
        protocol = served.protocols[-1]
        assert protocol.cycle.transport is protocol.transport  # uvicorn's cycle writes through it
    assert b"3\r\none\r\n" in served.writes[0] and served.writes[0].startswith(b"HTTP/1.1 200")
    assert served.writes[1:] == [b"3\r\ntwo\r\n0\r\n\r\n"]  # the rest, and the end, at once
    assert streamed.endswith(b"3\r\ntwo\r\n0\r\n\r\n")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def test_uvicorn_keeps_head_from_its_own_scope_and_reports_unfinished_responses() -> None:
    from app.api.middleware import head_as_get
    from app.api.sse import _DroppedReaders

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/unfinished":  # a response that starts and returns unfinished
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
            return
        assert scope["method"] == "GET"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"body"})

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "HEAD":
            await head_as_get(inner, scope, receive, send)  # a copy of the scope says GET
        else:
            await inner(scope, receive, send)

    async with _Served(app) as served:
        # HEAD, then GET on the same connection: the second answer follows the first's head at once.
        pair = b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"
        got = await served.exchange(pair, lambda got: got.endswith(b"\r\n\r\nbody"))
        head, _, rest = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"content-length: 4" in head.lower()
        assert rest.startswith(b"HTTP/1.1 200")  # no body after the HEAD answer: uvicorn saw HEAD
        # app/api/sse.py filters exactly this record of this logger for a reader it drops on purpose.
        records = _Records()
        logger = logging.getLogger("uvicorn.error")
        logger.addHandler(records)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"GET /unfinished HTTP/1.1\r\nHost: a\r\n\r\n")
            assert await wait_until_async(lambda: _DroppedReaders.MESSAGE in records.messages, 10), records.messages
            writer.close()
        finally:
            logger.removeHandler(records)


async def test_uvicorn_lets_a_connection_wait_unread_and_closes_it_at_eof_and_at_shutdown() -> None:
    """A connection waiting at the cap has had uvicorn's ``connection_made`` (which only records it:
    transport, ``flow``), and reading paused; one answered 503 is closed when its client closes
    (``eof_received`` returns nothing true); at a stop, uvicorn's ``shutdown`` closes a connection
    that never started a request (one still waiting)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert parameters(HttpToolsProtocol.eof_received) == ["self"]
    assert parameters(HttpToolsProtocol.shutdown) == ["self"]
    async with _Served(_ok_app) as served:
        _, writer = await asyncio.open_connection("127.0.0.1", served.port)
        assert await wait_until_async(lambda: len(served.protocols) == 1, 10)
        protocol = served.protocols[0]
        assert protocol.cycle is None and protocol in protocol.server_state.connections
        assert not protocol.eof_received()  # the transport closes itself at the client's EOF
        protocol.flow.pause_reading()  # as a connection waiting at the cap
        writer.write(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        await writer.drain()
    # The server stopped (within _Served's 10 s): the waiting connection was closed by shutdown().
    assert served.calls[-1] == "connection_lost"
    writer.close()


# ---- httptools and the event loop's transports -------------------------------------------------
def test_httptools_calls_back_within_feed_data_head_by_head() -> None:
    """``GuardedHttpTools._parse`` feeds uvicorn's parser one request head at a time and counts the
    pipeline after each feed: the parser's callbacks for a head must all run inside that call."""
    import httptools

    events: list[str] = []

    class Callbacks:
        def on_message_begin(self) -> None:
            events.append("begin")

        def on_headers_complete(self) -> None:
            events.append("headers")

        def on_message_complete(self) -> None:
            events.append("complete")

    parser = httptools.HttpRequestParser(Callbacks())
    parser.feed_data(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
    assert events == ["begin", "headers", "complete"]
    parser.feed_data(b"GET /b HTTP/1.1\r\n")
    parser.feed_data(b"Host: a\r\n\r\n")
    assert events == ["begin", "headers", "complete"] * 2


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_a_transport_pauses_at_once_when_its_high_water_mark_drops_under_its_buffer(loop_name: str) -> None:
    """``GuardedHttpTools.on_response_complete`` sets the high-water mark to 0 while an answer is
    unsent: the transport must call ``pause_writing`` at once (and ``resume_writing`` once drained)."""
    if loop_name == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed here (it is on Linux)")
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_pause_at_once())
    finally:
        loop.close()


async def _pause_at_once() -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    drained = asyncio.Event()

    class Writer(asyncio.Protocol):
        def pause_writing(self) -> None:
            calls.append("pause")

        def resume_writing(self) -> None:
            calls.append("resume")
            drained.set()

    near, far = socket.socketpair()
    far.setblocking(False)
    try:
        transport, _ = await loop.create_connection(Writer, sock=near)
        transport.set_write_buffer_limits(high=1 << 30)
        while transport.get_write_buffer_size() == 0:  # fill the kernel's buffer, then the transport's
            transport.write(b"x" * 65536)
        transport.set_write_buffer_limits(high=0)
        assert calls == ["pause"]
        async with asyncio.timeout(10):
            while not drained.is_set():
                try:
                    far.recv(1 << 20)
                except BlockingIOError:
                    await asyncio.sleep(0.001)
        assert calls == ["pause", "resume"]
        transport.close()
    finally:
        far.close()


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_a_transport_paused_from_its_first_read_delivers_nothing_more_until_resumed(loop_name: str) -> None:
    """A connection waiting at the cap pauses reading in ``connection_made``: asyncio then delivers
    nothing; uvloop starts reading after ``connection_made`` all the same, so ``GuardedHttpTools``
    keeps what that read brings and pauses the transport again from ``data_received``, after which
    nothing more may come until it is let in (``resume_reading``)."""
    if loop_name == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed here (it is on Linux)")
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_paused_from_the_start())
    finally:
        loop.close()


async def _paused_from_the_start() -> None:
    received: list[bytes] = []
    made: list[asyncio.Transport] = []

    class Waiting(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.append(transport)  # type: ignore[arg-type]  # (uvloop's is no asyncio.Transport subclass)
            made[0].pause_reading()

        def data_received(self, data: bytes) -> None:
            received.append(data)
            made[0].pause_reading()  # paused already, as far as the protocol knows

    async def turns() -> None:  # turns of the loop in which data would come
        for _ in range(20):
            await asyncio.sleep(0.005)

    server = await asyncio.get_running_loop().create_server(Waiting, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
        await writer.drain()
        assert await wait_until_async(lambda: bool(made), 10)
        await turns()
        first = b"".join(received)
        assert first in (b"", b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")  # uvloop 0.23: the latter
        writer.write(b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n")
        await writer.drain()
        await turns()
        assert b"".join(received) == first  # nothing more while paused
        made[0].resume_reading()
        assert await wait_until_async(lambda: b"".join(received).endswith(b"/b HTTP/1.1\r\nHost: a\r\n\r\n"), 10)
        writer.close()
        made[0].close()
    finally:
        server.close()
        await server.wait_closed()


# ---- FastAPI and Starlette: routes, middleware, responses, static files -------------------------
def test_fastapi_route_internals_the_direct_routes_read() -> None:
    from fastapi.dependencies.models import Dependant
    from fastapi.routing import APIRoute
    from starlette.routing import Match

    from app.api.routing import BridgeRoute
    from app.main import create_app

    fields = {f.name for f in dataclasses.fields(Dependant)}
    read = {
        "path_params",
        "query_params",
        "header_params",
        "cookie_params",
        "body_params",
        "dependencies",
        "request_param_name",
        "websocket_param_name",
        "http_connection_param_name",
        "response_param_name",
        "background_tasks_param_name",
        "security_scopes_param_name",
    }
    assert read <= fields, f"FastAPI's Dependant lost {read - fields}"
    assert parameters(APIRoute.matches) == ["self", "scope"]
    assert parameters(APIRoute.handle) == ["self", "scope", "receive", "send"]
    assert parameters(APIRoute.__init__)[:3] == ["self", "path", "endpoint"]
    assert Match.NONE in Match
    # Every route of the bridge is still called directly (app/api/routing.py): a FastAPI release
    # that renamed what direct_parameters reads would quietly send them all the slow way.
    routes = [r for r in create_app().routes if isinstance(r, BridgeRoute)]
    assert routes and all(r.own for r in routes)
    slow = [f"{sorted(r.methods or ())} {r.path}" for r in routes if r._direct is None]
    assert not slow, f"routes no longer called directly: {slow}"
    for route in routes:
        assert route.path_regex.match(route.path.replace("{", "").replace("}", "")) is not None


_items = APIRouter(route_class=BridgeRoute)


@_items.get("/items/{item_id}")
async def _item(item_id: str, request: Request) -> Response:
    return JSONResponse({"id": item_id, "app": type(request.app).__name__})


async def test_starlette_routing_and_middleware_as_the_bridge_extends_them() -> None:
    from app.api import routing

    outer_scopes: list[Message] = []

    class Outer:
        """A pure ASGI middleware added with keyword arguments; it routes on the encoded path."""

        def __init__(self, app: Any, *, tag: str) -> None:
            self.app = app
            self.tag = tag

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                scope["path"] = scope["raw_path"].decode("latin-1")
                outer_scopes.append(scope)
            await self.app(scope, receive, send)

    app = FastAPI()
    routing.include(app, [_items])  # appended to app.router.routes after the app was made
    app.add_middleware(Outer, tag="t")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        got = await client.get("/items/a%2Fb")
        assert got.status_code == 200 and got.json() == {"id": "a%2Fb", "app": "FastAPI"}  # still encoded
        refused = await client.post("/items/x")
        assert refused.status_code == 405 and refused.headers["allow"] == "GET"
    # The matched route is left in the very scope the middleware passed down (metrics' template).
    assert outer_scopes[0]["route"].path == "/items/{item_id}"
    assert "/items/{item_id}" in app.openapi()["paths"]  # made from app.routes on first use


async def test_routes_and_exception_handlers_as_the_direct_routes_read_them() -> None:
    """api/routing.DirectRoutes serves a direct route from the middleware: it reads the routes'
    ``path_regex``, ``path`` and ``methods`` from ``app.router.routes``, takes the child scope of
    ``Route.matches`` (``path_params``, ``route``), and answers an error through
    ``app.exception_handlers`` (keyed by exception class; ``Exception`` there too)."""
    from starlette.routing import Match, Route

    from app.api import routing

    app = FastAPI()
    routing.include(app, [_items])

    async def failing(request: Request) -> Response:
        raise KeyError("x")

    async def handle_key_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"handled": type(exc).__name__}, status_code=418)

    app.add_exception_handler(KeyError, handle_key_error)
    assert app.exception_handlers[KeyError] is handle_key_error
    route = next(r for r in app.router.routes if isinstance(r, routing.BridgeRoute))
    assert isinstance(route, Route) and route.path == "/items/{item_id}" and route.methods == {"GET"}
    scope: dict[str, Any] = {"type": "http", "method": "GET", "path": "/items/a%2Fb", "root_path": ""}
    match, child = route.matches(scope)
    assert match is Match.FULL and child["path_params"] == {"item_id": "a%2Fb"} and child["route"] is route
    direct = routing.DirectRoutes(app)
    assert direct.find(scope) is route
    assert direct.find({**scope, "method": "POST"}) is None  # the application says 405
    assert direct.find({**scope, "path": "/items"}) is None
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    await direct.serve(route, dict(scope), receive, send)
    assert sent[0]["status"] == 200 and json.loads(sent[1]["body"]) == {"id": "a%2Fb", "app": "FastAPI"}
    route.endpoint = failing  # (its direct call takes only the request)
    route._direct = ("request", ())
    sent.clear()
    await direct.serve(route, dict(scope), receive, send)
    assert sent[0]["status"] == 418 and json.loads(sent[1]["body"]) == {"handled": "KeyError"}


async def test_starlette_responses_and_static_files_as_the_bridge_subclasses_them(tmp_path: Path) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.openapi.utils import get_openapi
    from starlette.staticfiles import StaticFiles

    from app.api.fastapi_options import app_options

    # api/sse.py: an EventStream is a Response only to the framework (it sets its status_code and
    # background, not what Response.__init__ makes) and answers as the ASGI callable it is.
    assert inspect.iscoroutinefunction(Response.__call__)
    assert parameters(Response.__call__) == ["self", "scope", "receive", "send"]
    # api/ui.py overrides this; a folder asked for without its slash is redirected with `location`.
    assert parameters(StaticFiles.get_response) == ["self", "path", "scope"]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<p>")
    files = StaticFiles(directory=tmp_path, html=True)
    scope: dict[str, Any] = {"type": "http", "method": "GET", "path": "/sub", "root_path": "", "query_string": b""}
    scope |= {"scheme": "http", "server": ("h", 80), "headers": [(b"host", b"h")]}
    redirect = await files.get_response("sub", scope)
    assert redirect.status_code in (307, 308) and redirect.headers["location"].endswith("/sub/")
    accepts(get_openapi, "title", "version", "openapi_version", "description", "routes", "tags", "servers")
    accepts(get_openapi, "separate_input_output_schemas")
    accepts(
        get_swagger_ui_html,
        "openapi_url",
        "title",
        "swagger_js_url",
        "swagger_css_url",
        "swagger_favicon_url",
        "swagger_ui_parameters",
    )
    assert isinstance(app_options(), dict)  # FastAPI's `telemetry` option, looked up by signature


# ---- the ACP SDK: Connection over the bridge's transport, its sender and supervisor ---------------
class _Pipe:
    """The SDK's message-level transport protocol (``send``, ``receive``, ``close``) over queues."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.sent_in: list[Any] = []
        self.closed = False
        self.wrote = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.sent_in.append(_CALLER.get())
        self.wrote.set()

    async def receive(self) -> dict[str, Any] | None:
        return await self.incoming.get()

    async def close(self) -> None:
        self.closed = True

    async def next_sent(self) -> dict[str, Any]:
        async with asyncio.timeout(5):
            while not self.sent:
                self.wrote.clear()
                await self.wrote.wait()
        return self.sent.pop(0)


_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("caller", default=None)


def test_acp_sdk_members_the_bridge_imports() -> None:
    from app.acp.sdk import PROTOCOL_VERSION, Connection, MessageSender, RequestError, TaskSupervisor

    assert PROTOCOL_VERSION == 1
    assert parameters(Connection.__init__)[:4] == ["self", "handler", "writer", "reader"]
    assert parameters(Connection.send_request) == ["self", "method", "params"]
    assert parameters(Connection.send_notification) == ["self", "method", "params"]
    assert parameters(MessageSender.__init__) == ["self", "writer", "supervisor"]
    assert parameters(MessageSender.send)[:2] == ["self", "payload"] and hasattr(MessageSender, "close")
    assert "source" in parameters(TaskSupervisor.__init__)
    assert "name" in parameters(TaskSupervisor.create) and hasattr(TaskSupervisor, "shutdown")
    error = RequestError.internal_error({"details": "x"})
    assert error.code == -32603 and error.to_error_obj() == {
        "code": -32603,
        "message": "Internal error",
        "data": {"details": "x"},
    }
    assert RequestError.invalid_params({}).code == -32602


async def test_acp_connection_over_the_bridge_transport_behaves_as_relied_on() -> None:
    from pydantic import BaseModel

    from app.acp.sdk import Connection, RequestError

    pipe = _Pipe()
    handled: list[tuple[str, Any, bool]] = []

    class Strict(BaseModel):
        n: int

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        handled.append((method, params, is_notification))
        if method == "fail":
            raise RequestError(-32001, "refused", {"why": "test"})
        if method == "invalid":
            Strict.model_validate(params)
        return {"echo": method}

    connection = Connection(handler, pipe)  # the message-level form: reader omitted, listening at once
    try:
        # A request the bridge sends: numbered by the SDK, written from the caller's task (so the
        # caller's context, where app/acp/connection.py records the id, is the one `send` sees).
        token = _CALLER.set("caller")
        try:
            call = asyncio.ensure_future(connection.send_request("session/new", {"cwd": "/"}))
        finally:
            _CALLER.reset(token)
        request = await pipe.next_sent()
        assert pipe.sent_in[-1] == "caller"
        assert request == {"jsonrpc": "2.0", "id": request["id"], "method": "session/new", "params": {"cwd": "/"}}
        await pipe.incoming.put({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s"}})
        assert await asyncio.wait_for(call, 5) == {"sessionId": "s"}
        # An error answer is raised as RequestError with its code.
        call = asyncio.ensure_future(connection.send_request("x", {}))
        request = await pipe.next_sent()
        await pipe.incoming.put({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "m"}})
        with pytest.raises(RequestError) as raised:
            await asyncio.wait_for(call, 5)
        assert raised.value.code == -32000
        # An agent request: the handler gets the very params object of the message (the bridge
        # correlates the request id by its identity) and its result, or error, is the answer.
        params = {"sessionId": "s", "path": "/a"}
        await pipe.incoming.put({"jsonrpc": "2.0", "id": 7, "method": "fs/read_text_file", "params": params})
        answer = await pipe.next_sent()
        assert handled[-1][0] == "fs/read_text_file" and handled[-1][1] is params and handled[-1][2] is False
        assert answer == {"jsonrpc": "2.0", "id": 7, "result": {"echo": "fs/read_text_file"}}
        await pipe.incoming.put({"jsonrpc": "2.0", "id": 8, "method": "fail", "params": {}})
        assert (await pipe.next_sent())["error"] == {"code": -32001, "message": "refused", "data": {"why": "test"}}
        await pipe.incoming.put({"jsonrpc": "2.0", "id": 9, "method": "invalid", "params": {"n": "x"}})
        assert (await pipe.next_sent())["error"]["code"] == -32602  # pydantic's ValidationError
        # The end of the agent's output (receive() -> None) fails what still waits for an answer.
        call = asyncio.ensure_future(connection.send_request("late", {}))
        await pipe.next_sent()
        await pipe.incoming.put(None)
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(call, 5)
    finally:
        await connection.close()
    assert pipe.closed


async def test_acp_message_sender_writes_lines_and_the_supervisor_refuses_once_shut_down() -> None:
    from app.acp.sdk import MessageSender, TaskSupervisor

    near, far = socket.socketpair()
    try:
        _, writer = await asyncio.open_connection(sock=near)
        supervisor = TaskSupervisor(source="test")
        sender = MessageSender(writer, supervisor)
        await sender.send({"jsonrpc": "2.0", "method": "m", "params": {"a": "é"}})
        await sender.close()
        far.settimeout(5)
        line = far.recv(65536)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == {"jsonrpc": "2.0", "method": "m", "params": {"a": "é"}}
        await supervisor.shutdown()

        async def nothing() -> None: ...

        coroutine = nothing()
        with pytest.raises(RuntimeError):  # app/acp/connection.py: send_later on a closed connection
            supervisor.create(coroutine, name="late")
        coroutine.close()
        writer.close()
    finally:
        far.close()


# ---- httpx: event hooks on every redirect hop ---------------------------------------------------
async def test_httpx_request_hooks_see_every_redirect_hop() -> None:
    from app.agents.acp_catalog import PlainHttpRefused, https_only

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/start":
            return httpx.Response(302, headers={"location": "http://plain.example/next"})
        return httpx.Response(200, text="ok")

    transport = httpx.MockTransport(answer)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True, event_hooks=https_only(False)) as client:
        with pytest.raises(PlainHttpRefused):
            await client.get("https://secure.example/start")
    async with httpx.AsyncClient(transport=transport, follow_redirects=True, event_hooks=https_only(True)) as client:
        assert (await client.get("https://secure.example/start")).text == "ok"


class _Hanging:
    """A server on a loopback port that answers any request with a streamed body's first chunk, then
    sends nothing more until the client goes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            conn, _ = self.listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
                conn.recv(65536)  # until the client shuts its end down

    def close(self) -> None:
        self.listener.close()
        self.thread.join(10)


def test_httpx_gives_the_response_socket_that_stops_a_blocked_read() -> None:
    """The Python client stops a stream from any thread by shutting down the socket httpx reads
    (``response.extensions["network_stream"].get_extra_info("socket")``, clients/python streams.py)."""
    from acp_rest_bridge_client.streams import Shutdown

    server = _Hanging()
    try:
        with httpx.Client(timeout=30) as client, client.stream("GET", server.url) as response:
            sock = response.extensions["network_stream"].get_extra_info("socket")
            assert isinstance(sock, Shutdown)
            chunks = response.iter_raw()
            assert next(chunks) == b"first"
            started = time.monotonic()
            sock.shutdown(socket.SHUT_RDWR)  # (from another thread, in the client)
            with contextlib.suppress(httpx.ReadError, httpx.RemoteProtocolError):  # ended or cut, at once
                for _ in chunks:
                    pass
            assert time.monotonic() - started < 10
    finally:
        server.close()


async def test_httpx_async_gives_the_response_socket_too() -> None:
    from acp_rest_bridge_client.streams import Shutdown

    server = _Hanging()
    try:
        async with httpx.AsyncClient(timeout=30) as client, client.stream("GET", server.url) as response:
            sock = response.extensions["network_stream"].get_extra_info("socket")
            assert isinstance(sock, Shutdown)
            sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(httpx.ReadError, httpx.RemoteProtocolError):
                async with asyncio.timeout(10):
                    async for _ in response.aiter_raw():
                        pass
    finally:
        server.close()


# ---- prometheus-client: a custom collector on a registry of the bridge's own -----------------------
def test_prometheus_collects_at_each_scrape_and_not_at_registration() -> None:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.registry import CollectorRegistry

    scrapes: list[int] = []

    class Collector:
        def collect(self) -> Any:
            scrapes.append(1)
            counter = CounterMetricFamily("acp_bridge_x", "X", labels=["agent"])
            counter.add_metric(["mock"], 3)
            yield counter
            histogram = HistogramMetricFamily("acp_bridge_h", "H", labels=["route"])
            histogram.add_metric(["/v1"], [("0.1", 1), ("+Inf", 2)], 0.5)
            yield histogram
            yield GaugeMetricFamily("acp_bridge_g", "G", value=1)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    assert scrapes == []  # registering does not run collect (the services may not run yet)
    text = generate_latest(registry).decode()
    assert scrapes == [1]
    for line in ('acp_bridge_x_total{agent="mock"} 3.0', 'acp_bridge_h_bucket{le="+Inf",route="/v1"} 2.0'):
        assert line in text
    assert "acp_bridge_h_sum" in text and "acp_bridge_g 1.0" in text
    assert CONTENT_TYPE_LATEST.startswith("text/plain")


# ---- OpenTelemetry: exporters by entry point, spans and the trace context -----------------------
def test_opentelemetry_exporters_and_context_as_the_bridge_uses_them() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from app.tracing import Tracing, exporter

    for name in ("otlp", "console"):  # the names OTEL_TRACES_EXPORTER takes, as entry points
        assert isinstance(exporter(name), SpanExporter)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing = Tracing(provider)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracing.server_span("GET", [(b"traceparent", parent.encode())]) as span:
        span.set_attribute("http.route", "/x")
        span.update_name("GET /x")
        with tracing.client_span("session/prompt", {"_meta": {"k": 1}}) as params:
            assert params["_meta"]["k"] == 1 and params["_meta"]["traceparent"].startswith("00-0af76519")
    turn = tracing.start_span("turn", tracing.current())
    with tracing.use(turn):
        pass
    turn.end()
    tracing.shutdown()
    names = {s.name: s for s in memory.get_finished_spans()}
    assert set(names) == {"GET /x", "session/prompt", "turn"}
    assert format(names["GET /x"].context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


# ---- psycopg: what the PostgreSQL store and the fleet read of it ------------------------------
def test_psycopg_members_the_store_and_fleet_rely_on() -> None:
    import psycopg
    from psycopg.pq import TransactionStatus
    from psycopg_pool import ConnectionPool, PoolTimeout

    from app.events.postgres import is_storage_failure

    # A cancelled statement is the data's fault, not the database's (events/postgres.py).
    assert issubclass(psycopg.errors.QueryCanceled, psycopg.OperationalError)
    assert not is_storage_failure(psycopg.errors.QueryCanceled("x"))
    assert is_storage_failure(psycopg.OperationalError("x")) and is_storage_failure(psycopg.InterfaceError("x"))
    assert isinstance(psycopg.Connection.closed, property) and isinstance(psycopg.Connection.broken, property)
    assert TransactionStatus.IDLE.name == "IDLE"
    accepts(psycopg.Connection.connect, "autocommit")
    assert hasattr(psycopg.Cursor, "copy") and hasattr(psycopg.Connection, "transaction")
    assert hasattr(psycopg.AsyncConnection, "notifies") and hasattr(psycopg.AsyncConnection, "connect")
    accepts(ConnectionPool.__init__, "min_size", "max_size", "kwargs", "check", "timeout", "open", "name")
    assert parameters(ConnectionPool.check_connection) == ["conn"]  # a static method given as `check`
    assert issubclass(PoolTimeout, Exception)


# ---- standardwebhooks: the signature webhook receivers verify ------------------------------------
def test_standardwebhooks_signs_as_receivers_verify() -> None:
    import base64
    from datetime import UTC, datetime

    from standardwebhooks import Webhook

    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    now = datetime.now(UTC)
    signature = Webhook(secret).sign("msg_1", now, '{"a":1}')
    assert signature.startswith("v1,")
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}
    assert Webhook(secret).verify('{"a":1}', headers) == {"a": 1}


# ---- the register and CI agree ------------------------------------------------------------------
def test_the_register_and_the_newest_releases_run_name_the_same_packages() -> None:
    import re

    from tests.support import ROOT

    register = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split("\n## Couplings\n", 1)[1]
    listed = register.split("Coupled packages:", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`([a-z0-9-]+)`", listed)
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    coupled = script.split("\ncoupled=(", 1)[1].split(")", 1)[0].split()
    assert named and named == coupled, "ARCHITECTURE.md's coupled packages and .ci/run's `coupled` differ"
    for test in re.findall(r"`(test_[a-z0-9_]+)`", register):
        assert test in globals(), f"the register names a test this module does not have: {test}"
    for path in re.findall(r"`(tests/[a-z0-9_/]+\.py)`", register):
        assert (ROOT / path).is_file(), f"the register names a test module that does not exist: {path}"
