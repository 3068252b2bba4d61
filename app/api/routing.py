"""The route class of the bridge's routers: FastAPI's ``APIRoute`` without its per-request
machinery where the endpoint does not use it.

The bridge's endpoints take the ``Request`` and string path parameters, parse body and query
themselves (with the legacy status codes) and return a ``Response``. For them, FastAPI's dependency
solving, its exit stacks and the extra exception wrapper cost more than the rest of a trivial
request, and decide nothing: such an endpoint is called directly with its path parameters. An error
takes the same way as before, to the application's exception handlers. Matching, 405s and the OpenAPI
document stay FastAPI's; an endpoint that declares anything else gets FastAPI's full handling.

``DirectRoutes`` goes one step further for the application's own direct routes: ``BridgeMiddleware``
asks it for the route of a request and, when there is one, serves it there, without the layers
between the middleware and the route (Starlette's exception middleware, FastAPI's exit stack, the
router's walk over every route); the application's exception handlers still answer its errors.
Any request it is not sure of (no such route, another method, a route before it that could match)
goes the whole way.
"""

from __future__ import annotations

import inspect
import logging
import re
import typing
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

Endpoint = Callable[..., Awaitable[Response]]
ASGIHandler = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("acp_rest_bridge.api")


def direct_parameters(route: APIRoute) -> tuple[str | None, tuple[str, ...]] | None:
    """(the endpoint's Request parameter or None, its path parameters) when it can be called
    directly; None when it needs FastAPI's request handling."""
    dependant = route.dependant
    endpoint = route.endpoint
    if (
        not inspect.iscoroutinefunction(endpoint)
        or dependant.dependencies
        or dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.body_params
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    ):
        return None
    try:
        returns = typing.get_type_hints(endpoint).get("return")
    except Exception:  # an annotation that does not resolve: leave it to FastAPI
        return None
    if not (isinstance(returns, type) and issubclass(returns, Response)):
        return None  # FastAPI serialises other return values
    names = tuple(param.name for param in dependant.path_params)
    for param in dependant.path_params:
        if param.field_info.annotation is not str or param.field_info.metadata:
            return None  # a conversion or a constraint: FastAPI validates it
    request = dependant.request_param_name
    if set(inspect.signature(endpoint).parameters) != {*names, *([request] if request else [])}:
        return None
    return request, names


class BridgeRoute(APIRoute):
    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self._direct = direct_parameters(self)
        self.own = False  # one of the application's own routes (``include``), matched on its path

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        # A request is tried against the routes in turn and most do not match it: one of the app's
        # own routes says so after its regex, before FastAPI's lookups for routes of included routers.
        if self.own and scope["type"] == "http" and not scope.get("root_path"):
            if self.path_regex.match(scope["path"]) is None:
                return Match.NONE, {}
        return super().matches(scope)

    @property
    def direct(self) -> bool:
        """Its endpoint is called directly (see the module doc)."""
        return self._direct is not None

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = self._direct
        if direct is None or (self.methods is not None and scope["method"] not in self.methods):
            await super().handle(scope, receive, send)  # FastAPI's way, and its 405
            return
        await self._call(direct, scope, receive, send)

    async def _call(
        self, direct: tuple[str | None, tuple[str, ...]], scope: Scope, receive: Receive, send: Send
    ) -> None:
        request_name, names = direct
        path_params = scope["path_params"]
        kwargs: dict[str, Any] = {name: path_params[name] for name in names}
        if request_name is not None:
            kwargs[request_name] = Request(scope, receive, send)
        endpoint: Endpoint = self.endpoint
        response = await endpoint(**kwargs)
        await response(scope, receive, send)


def include(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Add the routers' routes to the application itself, in order. ``include_router`` keeps each
    router as a nested branch that every request walks (and matches twice); the bridge's routers have
    no prefix, dependencies or settings of their own to apply, so their routes can be the app's."""
    for router in routers:
        for route in router.routes:
            if isinstance(route, BridgeRoute):
                route.own = True
            app.router.routes.append(route)
    # Done before the OpenAPI document is first made: it is made from the routes on first use.


class DirectRoutes:
    """The application's own direct routes, found for a request without the router (``find``), and
    served as the router would, the application's exception handlers included (``serve``)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._buckets: dict[str, list[tuple[re.Pattern[str], BridgeRoute | None]]] | None = None
        self._anywhere: list[tuple[re.Pattern[str], BridgeRoute | None]] = []

    def _index(self) -> dict[str, list[tuple[re.Pattern[str], BridgeRoute | None]]]:
        """Routes by their first two path segments (``/v1/sessions``), in the router's order; a
        route whose path does not spell them out (a mount, a parameter) is in every bucket. Made at
        the first request: the routes are final by then."""
        buckets: dict[str, list[tuple[re.Pattern[str], BridgeRoute | None]]] = {}
        anywhere: list[tuple[re.Pattern[str], BridgeRoute | None]] = []
        entries: list[tuple[str | None, tuple[re.Pattern[str], BridgeRoute | None]]] = []
        for route in self.app.router.routes:
            regex = getattr(route, "path_regex", None)
            path = getattr(route, "path", None)
            if not isinstance(regex, re.Pattern) or not isinstance(path, str):
                regex, path = re.compile(""), None  # a route of another kind: it may match anything
            direct = route if isinstance(route, BridgeRoute) and route.own and route.direct else None
            static = path is not None and isinstance(route, Route) and "{" not in _head(path)
            entries.append((_head(path) if static and path is not None else None, (regex, direct)))
        for key, entry in entries:
            if key is None:
                anywhere.append(entry)
                for bucket in buckets.values():
                    bucket.append(entry)
            else:
                buckets.setdefault(key, list(anywhere)).append(entry)
        self._anywhere = anywhere
        self._buckets = buckets
        return buckets

    def find(self, scope: Scope) -> BridgeRoute | None:
        """The direct route that answers this request, or None (the application decides)."""
        buckets = self._buckets if self._buckets is not None else self._index()
        path = scope["path"]
        for regex, route in buckets.get(_head(path), self._anywhere):
            if regex.match(path) is None:
                continue
            # The first route whose path matches decides, as in the router.
            if route is None or scope.get("root_path") or (route.methods and scope["method"] not in route.methods):
                return None
            return route
        return None

    async def serve(self, route: BridgeRoute, scope: Scope, receive: Receive, send: Send) -> None:
        match, child = route.matches(scope)
        direct = route._direct
        if match is not Match.FULL or direct is None:
            await self.app(scope, receive, send)
            return
        scope.update(child)
        scope.setdefault("app", self.app)
        scope.setdefault("router", self.app.router)
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await route._call(direct, scope, receive, sending)
        except Exception as exc:
            handler = self._handler(exc)
            if started or handler is None:
                raise  # as Starlette: nothing more can be said once the answer has begun
            response = await handler(Request(scope, receive, send), exc)
            await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Callable[[Request, Exception], Awaitable[Response]] | None:
        handlers = self.app.exception_handlers
        for cls in type(exc).__mro__:
            handler = handlers.get(cls)
            if handler is not None:
                return handler  # type: ignore[return-value]
        return None


def _head(path: str) -> str:
    """A path's first two segments: ``/v1/sessions`` of ``/v1/sessions/s1/messages``."""
    end = path.find("/", path.find("/", 1) + 1)
    return path if end < 0 else path[:end]
