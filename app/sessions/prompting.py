"""A session's turns: a message becomes a turn (``TurnQueue``: one at a time, the others wait in
order), its ``session/prompt`` goes to the agent, and what ends it is recorded: the agent's answer,
read in wire order (``prompt_answered``), or an error."""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from app.acp.sdk import RequestError
from app.errors import InvalidRequest
from app.events.envelope import dumps
from app.events.model import ERROR, JsonText
from app.logs import current_session
from app.metrics import Metrics
from app.tracing import Tracing
from app.translate.extensions import rpc_error_data
from app.translate.outgoing import prompt_params
from app.translate.prompt import Attachment, prompt_blocks, user_item_parts

from . import agent_setup
from .agent_link import AgentLink
from .host import SessionHost
from .request_book import HumanRequest
from .turns import Turn


class TurnHost(SessionHost, Protocol):
    """What a session's turns use of it besides the core."""

    @property
    def agent(self) -> AgentLink: ...
    @property
    def native_session_id(self) -> str | None: ...
    @property
    def pending(self) -> dict[Any, HumanRequest[Any]]: ...  # requests waiting for a person
    @property
    def metrics(self) -> Metrics | None: ...
    @property
    def tracing(self) -> Tracing | None: ...

    def cancel_pending(self) -> None:
        """Answer every request still waiting with its cancel result."""


def send_message(
    session: TurnHost, message: str, attachments: list[Attachment], image_data: dict[str, bytes] | None = None
) -> str:
    """Accept a message: its turn starts now (turn.started recorded before returning) or after
    the turn in flight, since ACP agents take one prompt at a time. Returns the turn's id.
    ``image_data``: the image attachments already read (``sessions.attachments.read_images``)."""
    current_session.set(session.id)
    session.check_accepting()
    check_not_waiting(session)
    image_capable = bool(session.agent.prompt_capabilities.get("image"))
    image_data = image_data or {}
    turn = session.turns.new_turn(
        message,
        prompt_blocks(
            agent_setup.for_agent(session.agent.setup, message),
            attachments,
            image_capable=image_capable,
            image_data=image_data,
        ),
        user_item_parts(attachments),
    )
    if session.tracing is not None:
        turn.trace_parent = session.tracing.current()  # the request's span, also for a turn that waits
    session.turns.submit(turn)
    return turn.turn_id


def check_not_waiting(session: TurnHost) -> None:
    """A message is refused while the running turn waits for a person: accepted, it would show
    nothing until the reply (ACP agents take one prompt at a time), and recorded at once, its
    turn.started would come before the end of the turn in flight. The turn waits when it has an
    open request and the agent has said nothing since asking (the legacy mock's demo asks and
    goes on: that turn does not wait)."""
    turn = session.turns.current
    if turn is None:
        return
    waiting = [r for r in session.pending.values() if r.turn_id == turn.turn_id and not r.resolved]
    if waiting and max(r.shown_at for r in waiting) >= session.log.last_sequence:
        first = min(waiting, key=lambda r: r.shown_at)
        raise InvalidRequest(
            f"{turn.turn_id} is waiting for a reply to {first.book.kind} {first.public_id};"
            " answer it, then send the message"
        )


async def cancel_running(session: TurnHost) -> None:
    """A terminate's first step: the running turn, if any, is cancelled (ACP ``session/cancel``,
    and the requests it waits on answered as cancelled) and given ``cancel_grace`` to end."""
    if session.turns.running and session.agent.connection is not None:
        with contextlib.suppress(Exception):
            await session.agent.notify("session/cancel", {"sessionId": session.native_session_id})
        session.cancel_pending()
        await session.turns.wait_idle(session.settings.cancel_grace)


def begin_turn(session: TurnHost, turn: Turn) -> None:
    turn.params = prompt_params(session.native_session_id, turn.blocks, turn.turn_id)
    if session.metrics is not None:
        turn.started = session.metrics.turn_started(session.spec.id)
    if session.tracing is not None:
        turn.span = session.tracing.start_span(
            "turn", turn.trace_parent, **{"session.id": session.id, "turn.id": turn.turn_id, "agent": session.spec.id}
        )
    # The raw of turn.started and of the user's item: serialised here once, not by the store
    # once for each of the three events.
    raw = JsonText(dumps({"jsonrpc": "2.0", "method": "session/prompt", "params": turn.params}))
    session.record(session.translator.turn_started(turn.turn_id, turn.message, turn.user_parts, raw=raw))


async def run_turn(session: TurnHost, turn: Turn) -> None:
    try:
        if turn.span is None:
            result = await session.agent.request("session/prompt", turn.params)
        else:
            assert session.tracing is not None
            with session.tracing.use(turn.span):  # the ACP request's span is the turn's child
                result = await session.agent.request("session/prompt", turn.params)
    except RequestError as exc:
        if not turn.ended:
            turn_failed(session, turn, exc)
        return
    except (ConnectionError, OSError):
        return  # the agent is gone: the process watcher records what happened
    finally:
        turn_over(session, turn, "interrupted")  # when nothing ended it (cancelled, agent gone)
    if not turn.ended:
        turn_done(session, turn, result)


def turn_over(session: TurnHost, turn: Turn, stop_reason: str) -> None:
    """Once per turn: its end counted, its span ended."""
    if turn.counted:
        return
    turn.counted = True
    if session.metrics is not None and turn.started:
        session.metrics.turn_ended(session.spec.id, stop_reason, turn.started)
    if turn.span is not None:
        turn.span.set_attribute("acp.stop_reason", stop_reason)
        turn.span.end()


def prompt_answered(session: TurnHost, turn: Turn, message: dict[str, Any]) -> None:
    """The agent answered the turn's prompt: what ends the turn is recorded now, in wire order
    right after the updates read with it (so it is committed and streamed with them), not when
    the turn's task wakes up. The same values as the ACP SDK gives that task."""
    if "result" in message:
        turn_done(session, turn, message["result"])
        return
    error = message.get("error") or {}
    if isinstance(error, dict):
        turn_failed(
            session, turn, RequestError(error.get("code", -32603), error.get("message", "Error"), error.get("data"))
        )
    # Anything else is left to the SDK and recorded when the turn's task wakes up.


def turn_done(session: TurnHost, turn: Turn, result: Any) -> None:
    turn.ended = True
    stop = result.get("stopReason") if isinstance(result, dict) else None
    turn_over(session, turn, stop if isinstance(stop, str) else "unknown")
    session.record(session.translator.turn_result(turn.turn_id, result, turn.response, session.native_session_id))
    used = session.state.last_turn  # what the turn used (tokens, cost), counted
    if session.metrics is not None and used is not None:
        session.metrics.turn_usage(session.spec.id, used.tokens, used.cost)


def turn_failed(session: TurnHost, turn: Turn, exc: RequestError) -> None:
    turn.ended = True
    turn_over(session, turn, "error")
    session.record_one(ERROR, rpc_error_data(exc.code, str(exc), exc.data), synthetic=True, raw=turn.response)
    session.record(session.translator.turn_ended(turn.turn_id, {"stopReason": "error"}, raw=None))
