"""One legacy session: what it is made of (the constructor), how it starts, takes messages, and ends.

Every part has one job: ``agent`` (``AgentLink``) is the process and its ACP connection; ``turns``
(``TurnQueue``) the prompts, one at a time, run by ``prompting``; ``translator`` turns ACP traffic
into legacy events, which ``record`` appends to ``log``; ``permissions``, ``questions`` and
``terminals`` hold what the agent asked of the bridge, answered through the shared ``services``
(``ClientServices``); ``incoming`` takes the agent's messages in wire order; ``ended`` says what an
end records and what an ended session keeps; ``listing`` makes its SessionInfo and saved record. The
parts take the session as the protocol of what they need (``host.SessionHost``), never as a
``Session``; what every session is built with comes in one ``SessionDeps``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from functools import partial
from typing import Any

from app.acp.process import AgentProcess, ExitInfo
from app.agents.registry import AgentSpec
from app.events.log import SessionEventLog
from app.events.model import SESSION_ENDED, SESSION_STARTED, EventDraft
from app.logs import current_session
from app.translate.prompt import Attachment, attachment

from . import agent_setup, ended, incoming, listing, prompting, request_book
from .agent_link import AgentLink
from .config import SessionConfig
from .deps import SessionDeps
from .permission_requests import Permissions
from .phases import TRANSITIONS, EndReason, Phase, ended_error
from .question_requests import Questions
from .recovery import Recovery
from .request_book import HumanRequest
from .saved import SavedSession
from .terminals import SessionTerminals
from .turns import TurnQueue


class Session:
    # Slots: an instance dict of this many members would cost ~1.5 KB per session, ended ones too.
    __slots__ = (
        "_early",
        "_ending",
        "agent",
        "config",
        "created_at_ms",
        "cwd",
        "end_reason",
        "exit_info",
        "fs_root",
        "id",
        "log",
        "metrics",
        "native_session_id",
        "pending",
        "permissions",
        "persisted",
        "phase",
        "processes",
        "questions",
        "recovery",
        "replayed",
        "replaying",
        "runner",
        "services",
        "settings",
        "shutting_down",
        "spec",
        "state",
        "stopped_by_shutdown",
        "terminals",
        "tracing",
        "translator",
        "turns",
    )

    def __init__(
        self,
        session_id: str,
        spec: AgentSpec,
        config: SessionConfig,
        log: SessionEventLog,
        *,
        cwd: str,
        fs_root: str,
        deps: SessionDeps,
    ) -> None:
        self.id = session_id
        self.settings = deps.settings
        self.services = deps.services
        self.processes = deps.processes  # where agent and terminal process groups are recorded
        self.metrics = deps.metrics
        self.tracing = deps.tracing
        self.spec = spec
        self.config = config
        self.log = log
        self.cwd = cwd
        self.fs_root = fs_root
        self.created_at_ms = int(time.time() * 1000)
        # The parts.
        self.agent = AgentLink(session_id, spec, deps.settings, deps.processes, deps.metrics, deps.tracing)
        self.turns = TurnQueue(session_id, partial(prompting.begin_turn, self), partial(prompting.run_turn, self))
        self.terminals = SessionTerminals()
        self.translator = agent_setup.translator(spec, self.terminals.output_of)
        self.state = self.translator.state  # what SessionInfo shows; kept when the translator goes (``_shed``)
        # Agent requests waiting for an answer (permissions and questions), by JSON-RPC id.
        self.pending: dict[Any, HumanRequest[Any]] = {}
        self.permissions = Permissions(self.pending)
        self.questions = Questions(self.pending)
        # The agent's id of the session (session/new).
        self.native_session_id: str | None = None
        # Lifecycle: changed only by ``_set_phase``.
        self.phase = Phase.STARTING
        self.end_reason: EndReason | None = None
        self.exit_info: ExitInfo | None = None
        # Set at server shutdown: pending requests are answered, nothing more is recorded.
        self.shutting_down = False
        self.stopped_by_shutdown = False  # it was live then: not ended, continued by the next run
        # The session's record is in the store (saved again when the session ends).
        self.persisted = False
        # Went through a bridge restart while live (``recovery``); None otherwise.
        self.recovery: Recovery | None = None
        # True while the agent replays its history (ACP session/load), until the next prompt:
        # those updates were logged when they happened and are not logged again.
        self.replaying = False
        self.replayed = 0
        # In a fleet (``fleet``): this bridge's advertised address, shown in SessionInfo.
        self.runner: str | None = None
        self._early: list[EventDraft] = []  # recorded during the handshake, logged after session.started
        self._ending: asyncio.Task[None] | None = None

    @classmethod
    def restored(
        cls, saved: SavedSession, log: SessionEventLog, deps: SessionDeps, recovery: Recovery | None = None
    ) -> Session:
        """A session of an earlier run on this data dir: listed, readable, no agent. Ended, unless
        it was live when that run stopped (``recovery``): then suspended until its next message."""
        session = cls(saved.session_id, saved.spec, saved.config, log, cwd=saved.cwd, fs_root=saved.fs_root, deps=deps)
        session.created_at_ms = saved.created_at_ms
        session.native_session_id = log.native_session_id = saved.native_session_id
        session.exit_info = saved.exit_info
        session.persisted = True
        session.state.totals.restore(saved.usage, saved.agent_cost)  # tokens and cost so far
        if recovery is not None:
            session.recovery = recovery
            session._set_phase(Phase.SUSPENDED)
        else:
            session._set_phase(Phase.ENDED, saved.end_reason)
            session._shed()
        return session

    # ---- lifecycle -----------------------------------------------------------------------
    def _set_phase(self, phase: Phase, reason: EndReason | None = None) -> None:
        if phase is not self.phase and phase not in TRANSITIONS[self.phase]:
            raise RuntimeError(f"session {self.id}: no step from {self.phase.value} to {phase.value}")
        self.phase = phase
        if reason is not None:
            self.end_reason = reason

    @property
    def ended(self) -> bool:
        return self.phase in (Phase.ENDING, Phase.ENDED)

    @property
    def process(self) -> AgentProcess | None:
        return self.agent.process

    # ---- recording -----------------------------------------------------------------------
    def record(self, drafts: list[EventDraft]) -> None:
        """Append drafts to the log now (never awaits, so wire order is kept)."""
        if self.phase is Phase.STARTING:
            self._early.extend(drafts)
            return
        for draft in drafts:
            self.log.append(draft)

    def record_one(self, event_type: str, data: dict[str, Any], *, synthetic: bool, raw: Any = None) -> None:
        self.record([EventDraft(event_type, data, synthetic=synthetic, raw=raw)])

    # ---- start-up ------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the agent, `initialize`, `session/new`; record session.started."""
        current_session.set(self.id)  # log lines of this task and those it starts name the session
        capabilities = self.services.client_capabilities(self.spec.disabled_services)
        try:
            new = await self.agent.start(self, capabilities, self.config, self.cwd, self.state)
        except BaseException:
            await self.terminals.close_all()  # any the agent opened during the handshake
            raise
        self.native_session_id = new.native_session_id
        self.agent.watch(self._agent_exited, lambda: self.ended)
        self._set_phase(Phase.RUNNING)
        self.log.native_session_id = self.native_session_id
        metadata = listing.started_metadata(self.config)
        self.log.append(EventDraft(SESSION_STARTED, {"metadata": metadata}, synthetic=True, raw=new.raw or None))
        early, self._early = self._early, []
        for draft in early:
            self.log.append(draft)

    # ---- after a restart (``recovery``) ----------------------------------------------------------
    @property
    def suspended(self) -> bool:
        return self.phase is Phase.SUSPENDED

    def agent_restarted(self) -> None:
        """The agent of a suspended session runs again and continues it: messages are taken."""
        self.agent.watch(self._agent_exited, lambda: self.ended)
        self.log.native_session_id = self.native_session_id
        self._set_phase(Phase.RUNNING)

    def restored_as_ended(self, reason: EndReason) -> None:
        """A suspended session whose log shows that it ended after all (its record was not saved)."""
        self._set_phase(Phase.ENDED, reason)
        self._shed()

    def end_suspended(self, message: str) -> None:
        """A suspended session whose agent cannot be started again ends here, once, saying why."""
        self._set_phase(Phase.ENDED, "error")
        data = {"reason": "error", "terminated_by": "daemon", "message": message}
        self.record_one(SESSION_ENDED, data, synthetic=True)
        self.save()
        self.log.finish()  # its events are read from the store from now on
        self._shed()

    # ---- messages and turns ---------------------------------------------------------------
    def check_accepting(self) -> None:
        if self.ended:
            raise ended_error(self.spec.id, self.end_reason, self.exit_info, self.agent.stderr_text())

    def attachment(self, path: str, mime: str | None, filename: str | None) -> Attachment:
        """A message attachment, read from the session's root when relative, shown as given."""
        return attachment(path, self.fs_root, mime, filename)

    def send_message(
        self, message: str, attachments: list[Attachment], image_data: dict[str, bytes] | None = None
    ) -> str:
        """Accept a message; returns its turn's id (``prompting.send_message``)."""
        return prompting.send_message(self, message, attachments, image_data)

    # ---- AgentObserver: the connection hands over every message, in wire order (``incoming``) ----
    def on_incoming(self, message: dict[str, Any]) -> Awaitable[None] | None:
        return incoming.on_incoming(self, message)

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        incoming.on_unparsed_line(self, line, error)

    def on_outgoing(self, message: dict[str, Any]) -> None:
        incoming.on_outgoing(self, message)

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        return await self.services.handle(self, method, params, request_id)

    # ---- pending agent requests ------------------------------------------------------------
    def cancel_pending(self) -> None:
        """Answer every request still waiting with its cancel result (ACP requires it on cancel)."""
        for key in list(self.pending):
            self.cancel_one(key)

    def cancel_one(self, key: Any) -> bool:
        """Answer one waiting request with its cancel result; False if nothing waits under ``key``."""
        return request_book.cancel(self, self.pending, key)

    # ---- ending ----------------------------------------------------------------------------
    # Every end goes the same way: (1) phase ending, no more turns; (2) the running turn is
    # cancelled and the agent's session closed (terminate only; `session/close` when offered);
    # (3) waiting requests get their cancel result; (4) open items are closed and session.ended
    # recorded (not at server shutdown); (5) ``_release``: the saved record, terminals, the agent
    # process, the turn task; (6) phase ended.

    async def terminate(self) -> None:
        """Legacy terminate: record exactly one session.ended, stop the agent. Idempotent."""
        current_session.set(self.id)
        if self.ended:
            if self._ending is not None:
                await asyncio.shield(self._ending)
            return
        self._set_phase(Phase.ENDING, "terminated")  # (1)
        self.turns.close()
        # A task of its own: a second terminate waits for the same end, a client that goes away
        # does not cut it short.
        self._ending = asyncio.create_task(self._terminating())
        await asyncio.shield(self._ending)

    async def _terminating(self) -> None:
        await prompting.cancel_running(self)  # (2)
        await self.agent.close_session(self.native_session_id)  # ACP session/close, when offered
        self.cancel_pending()  # (3)
        ended.record_terminated(self)  # (4)
        await self._release()  # (5), (6)

    def _agent_exited(self, exit_info: ExitInfo) -> None:
        """The agent's process exited by itself (called by the link's watcher)."""
        self.exit_info = exit_info
        self._set_phase(Phase.ENDING, "error")  # (1)
        self.turns.close()
        self.cancel_pending()  # (3)
        ended.record_exit(self, exit_info, self.agent.process)  # (4)
        self._ending = asyncio.create_task(self._release())  # (5), (6)

    async def shutdown(self) -> None:
        """Server shutdown: stop the agent without recording anything more. A live session is
        suspended, not ended: the next server continues it (``recovery``)."""
        self.agent.stop_watching()
        self.shutting_down = True
        if self.phase is Phase.RUNNING:
            self.stopped_by_shutdown = True
        self._set_phase(Phase.ENDING)  # (1)
        self.turns.close()
        self.cancel_pending()  # (3)
        await self._release()  # (5), (6)

    async def _release(self) -> None:
        """Let go of everything the session holds, in this order."""
        with contextlib.suppress(Exception):
            self.save()  # how it ended, its final title and model: what a restarted server lists
        self.log.finish()  # its events are read from the store from now on
        with contextlib.suppress(Exception):
            await self.terminals.close_all()  # commands the agent started
        await self.agent.stop(ended.stop_reason(self))  # connection, process group, transcript
        await self.turns.cancel()  # a turn still waiting for the agent's answer
        self._set_phase(Phase.ENDED)
        if not self.shutting_down:
            self._shed()

    def _shed(self) -> None:
        """Ended for good: the parts that ran it go (``ended.shed``), and what is left of its end."""
        ended.shed(self)
        self._early = []
        self._ending = None

    # ---- the saved record and SessionInfo ------------------------------------------------------
    def save(self) -> None:
        """Save what a restarted server needs to list the session again (the events are in the log)."""
        if self.persisted:
            self.log.save_record(listing.saved_record(self))

    def info(self) -> dict[str, Any]:
        return listing.info(self)
