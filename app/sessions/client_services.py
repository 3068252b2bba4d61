"""The bridge's ACP *client*: what it answers when an agent asks (permissions, elicitation, files,
terminals), the notifications it reads besides `session/update`, and the client capabilities that
follow from them.

Built once by ``create_app`` and shared by every session. A request has up to two parts:
``observe`` runs synchronously, in wire order, when the request arrives (events are recorded
there); ``handle`` runs in the SDK's task for the request and returns the result (or raises
``acp.RequestError``). Only the methods listed here are advertised in ``initialize``, less those an
agent's profile disables. To add a client method: write its handler (a module of this package),
add one ``ClientMethod`` line to the list in ``ClientServices.methods``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from .host import SessionHost

if TYPE_CHECKING:
    # Loaded with the handlers, when the first session needs them (see ``methods``).
    from .permission_requests import Permissions
    from .question_requests import Questions
    from .terminals import SessionTerminals


class ServedSession(SessionHost, Protocol):
    """A session as the client services see it: the state of each part they serve."""

    @property
    def permissions(self) -> Permissions: ...
    @property
    def questions(self) -> Questions: ...
    @property
    def terminals(self) -> SessionTerminals: ...


Handle = Callable[[ServedSession, Any, Any], Awaitable[Any]]
Observe = Callable[[ServedSession, dict[str, Any]], None]
Notification = Callable[[SessionHost, dict[str, Any]], None]

# Message chunks say nothing about tool calls or config options (what observe_update looks for).
_CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})


@dataclass(slots=True, frozen=True)
class ClientMethod:
    """One agent->client request method the bridge answers."""

    method: str
    handle: Handle
    observe: Observe | None = None
    # The part of ``clientCapabilities`` this method makes true, deep-merged with the others. Methods
    # that declare the same part (the five ``terminal/*``) grant it only together: it is advertised
    # when none of them is disabled.
    capability: dict[str, Any] = field(default_factory=dict)


class ClientServices:
    """Every ACP client method and notification the bridge serves, by JSON-RPC method name."""

    def __init__(self, methods: list[ClientMethod] | None = None) -> None:
        self._methods = methods

    # The handlers (and the ACP SDK they use) are loaded when the first session needs them, not
    # when the server starts: it answers /v1/health before.
    @cached_property
    def methods(self) -> dict[str, ClientMethod]:
        from . import file_service, permission_requests, question_requests, terminals

        methods = self._methods
        if methods is None:
            # In this order (the order of clientCapabilities' members).
            methods = [
                ClientMethod(
                    "fs/read_text_file", file_service.read_text_file, capability={"fs": {"readTextFile": True}}
                ),
                ClientMethod(
                    "fs/write_text_file", file_service.write_text_file, capability={"fs": {"writeTextFile": True}}
                ),
                ClientMethod(permission_requests.METHOD, permission_requests.handle, permission_requests.observe),
                ClientMethod(
                    question_requests.ELICITATION,
                    question_requests.handle_elicitation,
                    question_requests.observe_elicitation,
                    {"elicitation": {"form": {}}},
                ),
                ClientMethod(
                    question_requests.EXTENSION,
                    question_requests.handle_extension,
                    question_requests.observe_extension,
                    {"_meta": {"sandbox-agent/requestQuestion": {}}},
                ),
                # ACP: `terminal: true` promises every terminal/* method.
                ClientMethod("terminal/create", terminals.create, capability={"terminal": True}),
                ClientMethod("terminal/output", terminals.output, capability={"terminal": True}),
                ClientMethod("terminal/wait_for_exit", terminals.wait_for_exit, capability={"terminal": True}),
                ClientMethod("terminal/kill", terminals.kill, capability={"terminal": True}),
                ClientMethod("terminal/release", terminals.release, capability={"terminal": True}),
            ]
        return {m.method: m for m in methods}

    @cached_property
    def notifications(self) -> dict[str, Notification]:
        """Notifications from the agent other than session/update."""
        from app.translate.extensions import ERROR_NOTIFICATION

        return {"$/cancel_request": cancel_request, ERROR_NOTIFICATION: agent_error}

    def client_capabilities(self, disabled: frozenset[str] = frozenset()) -> dict[str, Any]:
        """What ``initialize`` advertises: the capability of every method served, less those of the
        disabled methods (a capability shared by several methods needs all of them)."""
        withheld = {_key(self.methods[m].capability) for m in disabled if m in self.methods}
        caps: dict[str, Any] = {}
        for method, service in self.methods.items():
            if method not in disabled and _key(service.capability) not in withheld:
                _merge(caps, service.capability)
        return caps

    # ---- called by the session, in wire order (must not await) ---------------------------------
    def observe_update(self, session: ServedSession, message: dict[str, Any]) -> None:
        """Every `session/update`, before it is translated."""
        params = message.get("params")
        update = params.get("update") if type(params) is dict else None
        if type(update) is dict and update.get("sessionUpdate") in _CHUNKS:
            return  # (most updates of a stream): nothing here looks at them
        remember_tool_calls, refresh_models = self._update_observers
        remember_tool_calls(session, message)
        refresh_models(session.spec, message)

    @cached_property
    def _update_observers(self) -> tuple[Observe, Callable[[Any, dict[str, Any]], None]]:
        from . import agent_setup, permission_requests

        return permission_requests.remember_tool_calls, agent_setup.refresh_models

    def observe_request(self, session: ServedSession, method: str, message: dict[str, Any]) -> None:
        service = self.methods.get(method)
        if service is not None and service.observe is not None:
            service.observe(session, message)

    def notify(self, session: SessionHost, method: str, message: dict[str, Any]) -> bool:
        """Handle a notification; False when the bridge has no handler for it."""
        handler = self.notifications.get(method)
        if handler is None:
            return False
        handler(session, message)
        return True

    # ---- called in the SDK's task for the request ----------------------------------------------
    async def handle(self, session: ServedSession, method: str, params: Any, request_id: Any) -> Any:
        service = self.methods.get(method)
        if service is None or method in session.spec.disabled_services:
            from app.acp.sdk import RequestError

            raise RequestError.method_not_found(method)
        return await service.handle(session, params, request_id)


def cancel_request(session: SessionHost, message: dict[str, Any]) -> None:
    """`$/cancel_request`: the agent no longer needs the answer to one of its requests. ACP still
    wants it answered: a waiting request gets its cancel result at once (a permission
    ``cancelled``, an elicitation ``cancel``), and its book records what happened."""
    params = message.get("params")
    if not isinstance(params, dict) or "requestId" not in params:
        session.record(session.translator.unparsed("$/cancel_request without requestId", "$/cancel_request", message))
        return
    request_id = params["requestId"]
    if isinstance(request_id, Hashable):  # (a list or an object is no request's id)
        session.cancel_one(request_id)


def agent_error(session: SessionHost, message: dict[str, Any]) -> None:
    """`_sandbox-agent/error`: a legacy error event the agent reports."""
    session.record(session.translator.agent_error(message.get("params"), message))


def _key(capability: dict[str, Any]) -> str:
    return json.dumps(capability, sort_keys=True)


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
