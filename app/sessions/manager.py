"""All sessions of the server: create (with the legacy checks in order), look up, list, shut down."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.acp.orphans import ProcessRegistry
from app.agents.registry import AgentRegistry, AgentSpec
from app.errors import (
    AgentNotInstalled,
    InvalidRequest,
    ModeNotSupported,
    SessionAlreadyExists,
    SessionNotFound,
    StorageUnavailable,
    TooManySessions,
    UnsupportedAgent,
)
from app.events.log import SessionEventLog
from app.events.store import EventStore, session_id_problem
from app.events.stored import StoredEvent
from app.events.text import clean_text
from app.metrics import Metrics
from app.settings import Settings
from app.tracing import Tracing

from .config import SessionConfig
from .deps import SessionDeps
from .remote import RemoteSession
from .saved import SavedSession

if TYPE_CHECKING:
    # Loaded when a session is first made or restored, not at start: the server answers
    # /v1/health before any of it (and the ACP SDK) is needed.
    from .client_services import ClientServices
    from .fleet import Fleet
    from .session import Session

log = logging.getLogger("acp_rest_bridge.sessions")

PERMISSION_MODES = ("default", "plan", "bypass", "acceptEdits")


class SessionManager:
    def __init__(
        self,
        settings: Settings,
        registry: AgentRegistry,
        store: EventStore,
        services: ClientServices,
        processes: ProcessRegistry | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        on_event: Callable[[StoredEvent], None] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.tracing = tracing
        # Called with every event once it is committed (webhooks).
        self.on_event = on_event
        self.registry = registry
        self.store = store
        self.services = services
        self.processes = processes
        # What every session is built with.
        self.deps = SessionDeps(settings, services, processes, metrics, tracing)
        # Those this bridge runs, and in a fleet those another bridge runs (``RemoteSession``).
        self._sessions: dict[str, Session | RemoteSession] = {}
        self._creating: set[str] = set()
        # Set when the store is shared by a fleet of bridges (``fleet``).
        self.fleet: Fleet | None = None

    def get(self, session_id: str) -> Session | RemoteSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def find(self, session_id: str) -> Session | RemoteSession | None:
        return self._sessions.get(session_id)

    def local(self) -> list[Session]:
        """The sessions this bridge runs (or ran), not those of other bridges of a fleet."""
        return [s for s in self._sessions.values() if not isinstance(s, RemoteSession)]

    def list(self) -> list[Session | RemoteSession]:
        """Newest first."""
        return sorted(self._sessions.values(), key=lambda s: s.created_at_ms, reverse=True)

    async def lookup(self, session_id: str) -> Session | RemoteSession:
        """``get``, and in a fleet also a session another bridge made since, with its newest events."""
        session = self._sessions.get(session_id)
        if self.fleet is not None and session_id_problem(session_id) is None:  # (a NUL: no query)
            session = await self.fleet.current(session_id, session)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def restore(self, runners: dict[str, str] | None = None) -> None:
        """Sessions of an earlier run on this data dir: listed, readable, ended (no agent process).
        ``runners``: in a fleet, those another bridge runs (id -> its address)."""
        for record in self.store.load_sessions():
            try:
                session = self.restored(record, runners)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("cannot restore a session record (%s): %r", exc, record.get("info"))
                continue
            self._sessions[session.id] = session

    def restored(self, record: dict[str, Any], runners: dict[str, str] | None = None) -> Session | RemoteSession:
        """A session of its saved record; one another bridge runs (``runners``) is only followed here."""
        session_id = record["info"]["sessionId"]
        if runners is None or session_id not in runners:
            return self._restored(record)
        saved = SavedSession.read(record, self._spec_of)
        log_ = self.new_log(session_id)
        log_.finish()  # its events are read from the store
        return RemoteSession(saved, log_, runners[session_id])

    def resumed_here(self, record: dict[str, Any], log_: SessionEventLog) -> Session:
        """A live session of another bridge's, to run here (``fleet``), on the log that followed it."""
        return self._restored(record, log_=log_)

    def discard(self, session_id: str) -> None:
        """Drop the session from this bridge only (another bridge of the fleet runs it now)."""
        self._sessions.pop(session_id, None)

    def add(self, session: Session | RemoteSession) -> None:
        """A session made from its record (``restored``) joins the listed ones, in place of any."""
        self._sessions[session.id] = session

    def _restored(self, record: dict[str, Any], *, log_: SessionEventLog | None = None) -> Session:
        from . import recovery
        from .session import Session

        saved = SavedSession.read(record, self._spec_of)
        log_ = log_ or self.new_log(saved.session_id)
        # One still live when the server stopped goes on (``recovery``); an ended one's events
        # are read from the store.
        resumable = recovery.adopt(record)
        if resumable is None:
            log_.finish()
        return Session.restored(saved, log_, self.deps, resumable)

    def _spec_of(self, agent: str) -> AgentSpec:
        try:
            return self.registry.get(agent)
        except UnsupportedAgent:  # an agents-file entry removed since: still listed, never run
            return AgentSpec(agent, None)

    async def settle_restored(self) -> None:
        """Restored sessions that were live when the server stopped: what the old agent left open
        is closed in their logs, and they wait for their next message (``recovery``)."""
        for session in self.local():
            if session.recovery is not None:
                from . import recovery

                try:
                    await recovery.settle(session, self.store)
                except Exception:
                    log.exception("session %s: cannot read the end of its log; it stays as it was", session.id)

    async def ready(self, session: Session | RemoteSession) -> Session:
        """Before a message: a session suspended by a restart gets its agent back (or ends). One
        another bridge runs is refused here (``forward`` sends the others' messages on: it ended)."""
        if isinstance(session, RemoteSession):
            session.check_accepting()
        if session.recovery is not None:
            from . import recovery

            self.check_capacity()  # its agent is started again
            try:
                await recovery.revive(session)
            except Exception:
                # The error answers after what the failed start recorded (its session.ended) is
                # durable, so the client can read it, as for any other request.
                await session.log.settled()
                raise
        return session

    def new_log(self, session_id: str) -> SessionEventLog:
        settings = self.settings
        return SessionEventLog(
            session_id,
            self.store,
            tail_size=settings.event_tail,
            tail_bytes=settings.event_tail_bytes,
            on_append=self.on_event,
        )

    def check_storage(self) -> None:
        """503 while the data dir cannot take events: a new session or turn would not be kept."""
        cause = self.store.unavailable
        if cause is not None:
            raise StorageUnavailable(cause)

    def check_capacity(self) -> None:
        """429 when as many sessions are live (an agent process running, or being started) as the
        settings allow; ended and suspended ones do not count."""
        limit = self.settings.max_sessions
        if limit <= 0:
            return
        live = len(self._creating) + sum(1 for s in self.local() if not s.ended and not s.suspended)
        if live >= limit:
            raise TooManySessions(limit)

    def forget(self, session_id: str) -> None:
        """Remove an ended session from the server and the store (retention)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.log.close_subscribers()
        self.store.delete_session(session_id)

    def normalise(self, spec: AgentSpec, request: dict[str, Any]) -> SessionConfig:
        """Model default and agentMode/permissionMode rules of behavior §4.2."""
        agent_mode = request.get("agentMode") or "build"
        allowed_modes = spec.allowed_agent_modes()
        if allowed_modes is not None and agent_mode not in allowed_modes:
            raise ModeNotSupported(spec.id, agent_mode)
        permission_mode = request.get("permissionMode") or "default"
        if permission_mode not in PERMISSION_MODES:
            raise InvalidRequest(f"invalid permission mode: {permission_mode}")
        if permission_mode == "acceptEdits" and spec.id not in ("claude", "codex") and spec.legacy:
            permission_mode = "default"
        if permission_mode not in spec.allowed_permission_modes():
            raise ModeNotSupported(spec.id, permission_mode)
        model = request.get("model")
        if model is None:
            model = spec.models_response().get("defaultModel")
        from .agent_setup import check_request

        check_request(spec, agent_mode, permission_mode, request.get("model"))
        return SessionConfig(
            agent=spec.id,
            agent_mode=agent_mode,
            permission_mode=permission_mode,
            model=model,
            variant=request.get("variant"),
            agent_version=request.get("agentVersion"),
            directory=request.get("directory"),
            title=clean_text(title) if isinstance(title := request.get("title"), str) else title,
            mcp=request.get("mcp"),
            skills=request.get("skills"),
        )

    async def create(self, session_id: str, request: dict[str, Any]) -> Session:
        from .session import Session
        from .skills import link_requested_skills

        problem = session_id_problem(session_id)  # never 200 for a session no store can keep
        if problem is not None:
            raise InvalidRequest(problem)
        spec = await self.registry.resolve(request["agent"])  # 400 unsupported_agent first
        if self.fleet is not None:
            await self.fleet.current(session_id, self._sessions.get(session_id))  # one made elsewhere
        if session_id in self._sessions or session_id in self._creating:
            raise SessionAlreadyExists(session_id)
        self.check_storage()
        self.check_capacity()
        self._creating.add(session_id)
        try:
            if self.fleet is not None and not await self.fleet.claim(session_id):
                raise SessionAlreadyExists(session_id)  # another bridge is creating it
            if not spec.installed:
                # Legacy: creating a session installs a missing agent (`agentVersion` picks the version).
                if not self.registry.can_install(spec):
                    raise AgentNotInstalled(spec.id)
                version = request.get("agentVersion")
                await self.registry.install(spec, version if isinstance(version, str) else None)
            await link_requested_skills(request, self.settings.cache_dir() / "skills", self.processes)
            config = self.normalise(spec, request)
            fs_root = os.getcwd()
            cwd = fs_root
            if config.directory:
                cwd = os.path.abspath(os.path.join(fs_root, os.path.expanduser(config.directory)))
                if not os.path.isdir(cwd):
                    raise InvalidRequest(f"directory not found: {cwd}")
            log_ = self.new_log(session_id)
            session = Session(session_id, spec, config, log_, cwd=cwd, fs_root=fs_root, deps=self.deps)
            await session.start()
            if self.fleet is not None:
                session.runner = self.fleet.url
            self._sessions[session_id] = session
            session.persisted = True
            session.save()
            return session
        finally:
            self._creating.discard(session_id)

    async def shutdown(self) -> None:
        sessions = [s for s in self.local() if s.process is not None]
        await asyncio.gather(*(s.shutdown() for s in sessions), return_exceptions=True)
