"""The route class of the bridge's routers: FastAPI's ``APIRoute`` without its per-request
machinery where the endpoint does not use it.

The bridge's endpoints take the ``Request`` and string path parameters, parse body and query
themselves (with the legacy status codes) and return a ``Response``. For them, FastAPI's dependency
solving, its exit stacks and the extra exception wrapper cost more than the rest of a trivial
request, and decide nothing: such an endpoint is called directly with its path parameters. An error
takes the same way as before, to the application's exception handlers. Matching, 405s and the OpenAPI
document stay FastAPI's; an endpoint that declares anything else gets FastAPI's full handling.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

Endpoint = Callable[..., Awaitable[Response]]


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

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = self._direct
        if direct is None or (self.methods is not None and scope["method"] not in self.methods):
            await super().handle(scope, receive, send)  # FastAPI's way, and its 405
            return
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
