"""What a session does with each message its agent sends, in wire order (the session is the agent
connection's ``AgentObserver`` and hands every message here): updates become events (a tool call's
diffs once the files they name are read), requests go to the client services, the answer to a
prompt ends its turn (``prompting``), anything else is recorded as unparsed."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from app.fs.paths import fence_for
from app.translate.session_translator import SessionTranslator

from . import diff_files, prompting
from .client_services import ClientServices, ServedSession
from .prompting import TurnHost


class IncomingHost(TurnHost, ServedSession, Protocol):
    """What the agent's messages use of the session besides the core."""

    replaying: bool  # the agent replays its history (session/load): not logged again
    replayed: int

    @property
    def services(self) -> ClientServices: ...


def on_incoming(session: IncomingHost, message: dict[str, Any]) -> Awaitable[None] | None:
    """Handle one message from the agent now (never awaits, so wire order is kept). What is left to
    do once files are read comes back as an awaitable: the agent's next message waits for it."""
    method = message.get("method")
    if method == "session/update":
        if session.replaying:
            session.replayed += 1
            return None
        session.services.observe_update(session, message)
        params = message.get("params")
        wanted = session.translator.files_wanted(params)
        if wanted:  # read first (off the loop)
            return update_with_files(session, session.translator, message, wanted)
        session.record(session.translator.session_update(params, message))
    elif isinstance(method, str) and "id" in message:
        session.services.observe_request(session, method, message)
    elif isinstance(method, str) and method in session.spec.profile.update_notifications:
        # A vendor notification that is an ACP session update (qwen's mode changes).
        params = message.get("params")
        update = {**(params if isinstance(params, dict) else {})}
        update["sessionUpdate"] = session.spec.profile.update_notifications[method]
        session.record(session.translator.session_update({"update": update}, message))
    elif isinstance(method, str):
        if not session.services.notify(session, method, message) and not method.startswith("_"):
            # Unknown extension notifications (`_...`) are ignored (ACP).
            session.record(session.translator.unparsed(f"unknown notification: {method}", "agent.stdout", message))
    elif "id" in message and ("result" in message or "error" in message):
        turn = session.turns.response_read(message)
        if turn is not None and not turn.ended:
            prompting.prompt_answered(session, turn, message)
    else:
        session.record(session.translator.unparsed("not a JSON-RPC message", "agent.stdout", message))
    return None


async def update_with_files(
    session: IncomingHost, translator: SessionTranslator, message: dict[str, Any], paths: list[str]
) -> None:
    """A tool call update whose diffs need the files they name: read, then translated (by the
    session's translator when the update came)."""
    params = message.get("params")
    files = await diff_files.files_for(paths, fence_for(session.settings))
    if session.translator is not translator:
        return  # ended while reading, and shed (``ended``): the shared translator is fed nothing
    translator.supply_files(params, files)
    session.record(translator.session_update(params, message))


def on_unparsed_line(session: IncomingHost, line: bytes, error: str) -> None:
    session.record(session.translator.unparsed(error, "agent.stdout", line.decode("utf-8", "replace")))


def on_outgoing(session: IncomingHost, message: dict[str, Any]) -> None:
    """A message the bridge sends to the agent, as it goes."""
    method = message.get("method")
    if method == "session/prompt":
        session.replaying = False
        session.turns.prompt_sent(message.get("id"))
    elif method == "session/cancel":
        # ACP: after session/cancel the client answers every pending request as cancelled.
        session.cancel_pending()
