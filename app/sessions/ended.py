"""How a session ends: what its end records (``record_terminated``, ``record_exit``) and what an
ended session keeps (``shed``).

Ended for good, a session keeps what listing it and answering for it need (its SessionInfo
``state``, config, log, how it ended); the parts that ran it go, replaced by ones every ended
session shares (``shared_parts``): a translator fed nothing more, a closed turn queue, closed
terminals, empty request books. A few KB per session, which thousands of ended sessions would keep.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

from app.acp.process import AgentProcess, ExitInfo
from app.events.model import ERROR, SESSION_ENDED
from app.translate.session_translator import SessionState, SessionTranslator

from .host import SessionHost
from .permission_requests import Permissions
from .question_requests import Questions
from .request_book import HumanRequest, RequestBook
from .terminals import SessionTerminals
from .turns import Turn, TurnQueue


@dataclass(frozen=True, slots=True)
class EndedParts:
    """What every ended session has in place of its own parts."""

    translator: SessionTranslator
    turns: TurnQueue
    terminals: SessionTerminals
    permissions: Permissions
    questions: Questions


@functools.cache
def shared_parts() -> EndedParts:
    def begin(turn: Turn) -> None:
        raise RuntimeError("an ended session starts no turn")

    async def run(turn: Turn) -> None:
        raise RuntimeError("an ended session runs no turn")

    turns = TurnQueue("ended", begin, run)
    turns.close()
    terminals = SessionTerminals()
    terminals.closed = True
    # The books' pending requests: none is ever added (an ended session has no agent to ask).
    pending: dict[Any, HumanRequest[Any]] = {}
    return EndedParts(SessionTranslator(), turns, terminals, Permissions(pending), Questions(pending))


class EndedHost(SessionHost, Protocol):
    """The parts an ended session lets go of (set by ``shed``), and the state it keeps."""

    translator: SessionTranslator
    turns: TurnQueue
    terminals: SessionTerminals
    permissions: Permissions
    questions: Questions

    @property
    def exit_info(self) -> ExitInfo | None: ...


def record_terminated(session: SessionHost) -> None:
    """A terminate's end: open items closed, one ``session.ended``."""
    session.record(session.translator.flush())
    session.record_one(SESSION_ENDED, {"reason": "terminated", "terminated_by": "daemon"}, synthetic=True)


def record_exit(session: SessionHost, exit_info: ExitInfo, process: AgentProcess | None) -> None:
    """The agent's process exited by itself: open items closed, an ``error`` saying how it exited,
    one ``session.ended`` with its exit code and what it wrote on stderr."""
    message = exit_info.description
    session.record(session.translator.flush())
    session.record_one(ERROR, {"message": message, "code": "process_exit", "details": None}, synthetic=True)
    ended: dict[str, Any] = {"reason": "error", "terminated_by": "agent", "message": message}
    ended["exit_code"] = exit_info.code if exit_info.code is not None else -(exit_info.signal or 0)
    ended["stderr"] = process.stderr.output() if process is not None else None
    session.record_one(SESSION_ENDED, ended, synthetic=True)


def stop_reason(session: EndedHost) -> str:
    """Why its agent is stopped, as counted: ``shutdown``, ``exited`` (by itself), ``terminated``."""
    if session.shutting_down:
        return "shutdown"
    return "exited" if session.exit_info is not None else "terminated"


def shed(session: EndedHost) -> None:
    """Ended for good: the agent's lists and messages, not shown once ended, are dropped from its
    state (tokens and cost stay), and its parts become the shared ones. A request book with
    requests the end cancelled, or that died with an agent, stays: a late reply to one gets the
    ended error, or what happened to it."""
    _drop_agent_lists(session.state)
    shared = shared_parts()
    session.translator, session.turns, session.terminals = shared.translator, shared.turns, shared.terminals
    if _idle(session.permissions):
        session.permissions = shared.permissions
    if _idle(session.questions):
        session.questions = shared.questions


def _drop_agent_lists(state: SessionState) -> None:
    for name in ("available_commands", "config_options", "plans", "raw", "extra", "info_meta"):
        if getattr(state, name):
            setattr(state, name, type(getattr(state, name))())
    state.usage = None


def _idle(book: RequestBook[Any]) -> bool:
    return not book.open and not book.orphaned and not book.died
