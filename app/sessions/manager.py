"""All sessions of the server: create (with the legacy checks in order), look up, list, shut down."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import Any

from app.acp.orphans import ProcessRegistry
from app.acp.process import ExitInfo
from app.agents.registry import LEGACY_MODELS, AgentRegistry, AgentSpec
from app.errors import (
    AgentNotInstalled,
    InvalidRequest,
    ModeNotSupported,
    SessionAlreadyExists,
    SessionNotFound,
    UnsupportedAgent,
)
from app.events.log import SessionEventLog
from app.events.store import EventStore
from app.settings import Settings

from . import recovery, services
from .session import END_HOOKS, Session, SessionConfig
from .skills import skills_hook

log = logging.getLogger("acp_rest_bridge.sessions")

PERMISSION_MODES = ("default", "plan", "bypass", "acceptEdits")


class SessionManager:
    def __init__(
        self,
        settings: Settings,
        registry: AgentRegistry,
        store: EventStore,
        processes: ProcessRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.store = store
        self.processes = processes
        self._sessions: dict[str, Session] = {}
        self._creating: set[str] = set()
        services.load_builtin_services()

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def find(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def list(self) -> list[Session]:
        """Newest first."""
        return sorted(self._sessions.values(), key=lambda s: s.created_at_ms, reverse=True)

    def add_restored(self, session: Session) -> None:
        self._sessions[session.id] = session

    def restore(self) -> None:
        """Sessions of an earlier run on this data dir: listed, readable, ended (no agent process)."""
        for record in self.store.load_sessions():
            try:
                session = self._restored(record)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("cannot restore a session record (%s): %r", exc, record.get("info"))
                continue
            self._sessions[session.id] = session

    def _restored(self, record: dict[str, Any]) -> Session:
        info = record["info"]
        config = SessionConfig(**record["config"])
        # What the agent reported (model, title) wins, as in SessionInfo.
        config.model = info.get("model")
        config.title = info.get("title")
        try:
            spec = self.registry.get(config.agent)
        except UnsupportedAgent:  # an agents-file entry removed since: still listed, never run
            spec = AgentSpec(config.agent, None)
        session_id = info["sessionId"]
        log_ = SessionEventLog(session_id, self.store, tail_size=self.settings.event_tail)
        session = Session(
            session_id,
            spec,
            config,
            log_,
            cwd=record["cwd"],
            fs_root=record["fs_root"],
            settings=self.settings,
            processes=self.processes,
        )
        session.created_at_ms = int(info["createdAt"])
        session.native_session_id = log_.native_session_id = info.get("nativeSessionId")
        session.extensions[PERSISTED] = True
        state = recovery.adopt(record)
        if state is not None:
            # Live when the server stopped: it goes on (settle_restored, then the next message).
            session.extensions[recovery.STATE] = state
            session._started = True
            return session
        # A restored session is ended the way it ended then.
        session.ended = True
        session.end_reason = record.get("endReason") or "terminated"
        exit_info = record.get("exit")
        if isinstance(exit_info, dict):
            session.exit_info = ExitInfo(exit_info.get("code"), exit_info.get("signal"))
        return session

    async def settle_restored(self) -> None:
        """Restored sessions that were live when the server stopped: closed in their logs what the
        old agent left open, ready to go on (``recovery``)."""
        for session in list(self._sessions.values()):
            if recovery.recovery_of(session) is not None:
                try:
                    await recovery.settle(session, self.store, save_record)
                except Exception:
                    log.exception("session %s: cannot read the end of its log; it stays as it was", session.id)

    async def ready(self, session: Session) -> None:
        """Before a message: a session suspended by a restart gets its agent back (or ends)."""
        if recovery.needs_revive(session):
            await recovery.revive(session, save_record)

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
        if model is None and spec.id in LEGACY_MODELS:
            model = LEGACY_MODELS[spec.id]["defaultModel"]
        return SessionConfig(
            agent=spec.id,
            agent_mode=agent_mode,
            permission_mode=permission_mode,
            model=model,
            variant=request.get("variant"),
            agent_version=request.get("agentVersion"),
            directory=request.get("directory"),
            title=request.get("title"),
            mcp=request.get("mcp"),
            skills=request.get("skills"),
        )

    async def create(self, session_id: str, request: dict[str, Any]) -> Session:
        spec = self.registry.get(request["agent"])  # 400 unsupported_agent first
        if session_id in self._sessions or session_id in self._creating:
            raise SessionAlreadyExists(session_id)
        self._creating.add(session_id)
        try:
            if not spec.installed:
                # Legacy: creating a session installs a missing agent (`agentVersion` picks the version).
                if not self.registry.can_install(spec):
                    raise AgentNotInstalled(spec.id)
                version = request.get("agentVersion")
                await self.registry.install(spec, version if isinstance(version, str) else None)
            for hook in CREATE_HOOKS:
                await hook(self, spec, request)
            config = self.normalise(spec, request)
            fs_root = os.getcwd()
            cwd = fs_root
            if config.directory:
                cwd = os.path.abspath(os.path.join(fs_root, os.path.expanduser(config.directory)))
                if not os.path.isdir(cwd):
                    raise InvalidRequest(f"directory not found: {cwd}")
            log_ = SessionEventLog(session_id, self.store, tail_size=self.settings.event_tail)
            session = Session(
                session_id,
                spec,
                config,
                log_,
                cwd=cwd,
                fs_root=fs_root,
                settings=self.settings,
                processes=self.processes,
            )
            await session.start()
            self._sessions[session_id] = session
            session.extensions[PERSISTED] = True
            save_record(session)
            return session
        finally:
            self._creating.discard(session_id)

    async def shutdown(self) -> None:
        sessions = [s for s in self._sessions.values() if s.process is not None]
        await asyncio.gather(*(s.shutdown() for s in sessions), return_exceptions=True)


PERSISTED = "store.persisted"


def session_record(session: Session) -> dict[str, Any]:
    """What a restarted server needs to list the session again (the events are in the log)."""
    exit_info = session.exit_info
    return {
        "info": session.info(),
        "config": dataclasses.asdict(session.config),
        "cwd": session.cwd,
        "fs_root": session.fs_root,
        "endReason": session.end_reason,
        "exit": None if exit_info is None else {"code": exit_info.code, "signal": exit_info.signal},
        **recovery.record_fields(session),
    }


def save_record(session: Session) -> None:
    if session.extensions.get(PERSISTED):
        session.log.save_record(session_record(session))


async def _save_on_end(session: Session) -> None:
    save_record(session)  # how it ended (terminate, agent exit, server stop), its final title and model


END_HOOKS.append(_save_on_end)

# Async checks run at create before normalisation (legacy step 4: skills), in registration order.
CREATE_HOOKS: list[Any] = [skills_hook]
