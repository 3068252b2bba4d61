"""What permissions and questions share: agent requests that wait for a person.

Each request is registered in wire order (``add``, from the client services' ``observe``), answered
exactly once (a reply, an automatic decision, a timeout, or a cancel), and waited for by the SDK's
handler task (``wait``). The books of a session share its ``pending`` requests (by JSON-RPC id, in
the order asked). Cancels go through ``Session.cancel_one``/``cancel_pending``, which call the
book's ``on_cancelled``, so no request can stay pending after a terminate, an agent exit, a
`session/cancel` or a `$/cancel_request`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.acp.sdk import RequestError
from app.errors import InvalidRequest
from app.translate.hitl_shapes import allocate_id

from .host import SessionHost

Info = TypeVar("Info")
Host = TypeVar("Host", bound=SessionHost)


@dataclass(slots=True, eq=False)
class HumanRequest(Generic[Info]):
    """One agent request that waits for a person."""

    book: RequestBook[Info]
    public_id: str  # permission_id / question_id
    request_id: Any  # the JSON-RPC id of the agent's request
    method: str
    raw: dict[str, Any]
    info: Info
    future: asyncio.Future[Any]
    cancel_result: Any  # what the agent gets if the request is cancelled
    resolved: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    turn_id: str | None = None  # the turn that was running when the agent asked
    shown_at: int = 0  # the sequence of its requested event


class RequestBook(Generic[Info]):
    """A session's requests of one kind (permission or question), by public id."""

    kind = "request"

    def __init__(self, pending: dict[Any, HumanRequest[Any]]) -> None:
        # The session's requests waiting for an answer, of every book, by JSON-RPC id.
        self.pending = pending
        self.open: dict[str, HumanRequest[Info]] = {}
        # Cancelled because the session ended, never replied to: a late reply gets the ended error.
        self.orphaned: dict[str, HumanRequest[Info]] = {}
        self.used: set[str] = set()
        # Open when the agent (or its bridge) died, resolved by recovery: id -> what happened.
        self.died: dict[str, str] = {}
        self._by_request: dict[Any, HumanRequest[Info]] = {}

    # ---- agent side --------------------------------------------------------------------------
    def add(
        self,
        session: SessionHost,
        message: dict[str, Any],
        info: Info,
        candidates: tuple[str, ...],
        prefix: str,
        cancel_result: Any,
    ) -> HumanRequest[Info]:
        public_id = allocate_id(candidates, self.used, prefix)
        self.used.add(public_id)
        request_id = message.get("id")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        request = HumanRequest(
            self, public_id, request_id, str(message.get("method")), message, info, future, cancel_result
        )
        turn = session.turns.current
        request.turn_id = turn.turn_id if turn is not None else None
        request.shown_at = session.log.last_sequence + 1  # its requested event is recorded next
        self.pending[request_id] = request
        self.open[public_id] = request
        self._by_request[request_id] = request
        return request

    def finish(self, request: HumanRequest[Info], result: Any) -> bool:
        """Answer the agent. False when the request was already answered."""
        if request.resolved:
            return False
        request.resolved = True
        self.open.pop(request.public_id, None)
        if self.pending.get(request.request_id) is request:
            del self.pending[request.request_id]
        if not request.future.done():
            request.future.set_result(result)
        return True

    async def wait(
        self,
        session: Host,
        request_id: Any,
        on_timeout: Callable[[Host, HumanRequest[Info]], None],
    ) -> Any:
        """The answer for the agent (the SDK handler task awaits this)."""
        request = self._by_request.pop(request_id, None)
        if request is None:
            raise RequestError.invalid_params({"message": f"malformed {request_id!r} request"})
        future = request.future
        timeout = session.settings.hitl_timeout
        if timeout > 0 and not future.done():
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                on_timeout(session, request)
        return await future

    # ---- HTTP side -------------------------------------------------------------------------------
    def lookup(self, public_id: str) -> HumanRequest[Info]:
        """Legacy step 2: the waiting entry, else 400 ``unknown <kind> id``."""
        request = self.open.get(public_id) or self.orphaned.pop(public_id, None)
        if request is None:
            why = self.died.get(public_id)
            if why is not None:  # (legacy's status all the same: the request is gone)
                raise InvalidRequest(
                    f"unknown {self.kind} id: {public_id}: the request died with {why}; "
                    "it was closed as rejected and can no longer be answered"
                )
            raise self.unknown(public_id)
        return request

    @classmethod
    def unknown(cls, public_id: str) -> InvalidRequest:
        return InvalidRequest(f"unknown {cls.kind} id: {public_id}")

    def check_session(self, session: SessionHost, request: HumanRequest[Info]) -> None:
        """Legacy step 4: an ended session drops the entry and refuses (400 terminated / 500 exited)."""
        if not session.ended:
            return
        if not request.resolved:
            session.cancel_one(request.request_id)
        self.orphaned.pop(request.public_id, None)
        session.check_accepting()

    # ---- cancel ----------------------------------------------------------------------------------
    def on_cancelled(self, session: SessionHost, request: HumanRequest[Info]) -> None:
        """The request was answered with its cancel result: forget it, and record its resolved
        event (unless the server is stopping)."""
        if request.resolved:
            return
        request.resolved = True
        self.open.pop(request.public_id, None)
        if session.ended:
            self.orphaned[request.public_id] = request
        if not session.shutting_down:
            self.record_cancelled(session, request)

    def record_cancelled(self, session: SessionHost, request: HumanRequest[Info]) -> None:
        """Record the resolved event of a request answered with its cancel result."""
        raise NotImplementedError


def cancel(session: SessionHost, pending: dict[Any, HumanRequest[Any]], key: Any) -> bool:
    """Answer the request waiting under the JSON-RPC id ``key`` with its cancel result (its book
    records how it ended); False if nothing waits under ``key``."""
    request = pending.pop(key, None)
    if request is None:
        return False
    if not request.future.done():
        request.future.set_result(request.cancel_result)
    request.book.on_cancelled(session, request)
    return True


def response_raw(request: HumanRequest[Any], result: Any) -> dict[str, Any]:
    """The JSON-RPC response the agent receives (kept as the resolved event's raw)."""
    return {"jsonrpc": "2.0", "id": request.request_id, "result": result}
