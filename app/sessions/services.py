"""The bridge's ACP *client* services: what it answers when the agent asks (permissions,
elicitation, files, terminals), and the client capabilities that follow from them.

A service registers the JSON-RPC method it answers. ``observe`` runs synchronously, in wire order,
when the request arrives (record events there); ``handle`` runs in its own task and returns the
result (or raises ``acp.RequestError``). Only registered services are advertised in ``initialize``.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session

Handle = Callable[["Session", Any, Any], Awaitable[Any]]
Observe = Callable[["Session", dict[str, Any]], None]
Notification = Callable[["Session", dict[str, Any]], None]


@dataclass(slots=True)
class ClientService:
    method: str
    handle: Handle
    observe: Observe | None = None
    # The part of ``clientCapabilities`` this service makes true, deep-merged with the others.
    capability: dict[str, Any] = field(default_factory=dict)


SERVICES: dict[str, ClientService] = {}
# Notifications from the agent other than session/update (e.g. `$/cancel_request`, extensions).
NOTIFICATIONS: dict[str, Notification] = {}
# Called with every `session/update` message, in wire order, before it is translated (must not await).
UPDATE_OBSERVERS: list[Notification] = []


def register(service: ClientService) -> ClientService:
    SERVICES[service.method] = service
    return service


def on_notification(method: str) -> Callable[[Notification], Notification]:
    def decorate(fn: Notification) -> Notification:
        NOTIFICATIONS[method] = fn
        return fn

    return decorate


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def client_capabilities(disabled: frozenset[str] = frozenset()) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    for method, service in SERVICES.items():
        if method not in disabled:
            _merge(caps, service.capability)
    return caps


def load_builtin_services() -> None:
    """Import the modules that register services (each feature area owns one)."""
    from . import builtin_services  # noqa: F401
