"""All sessions of the server: create (with the legacy checks in order), look up, list, shut down."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from app.agents.registry import LEGACY_MODELS, AgentRegistry, AgentSpec
from app.errors import (
    AgentNotInstalled,
    InvalidRequest,
    ModeNotSupported,
    SessionAlreadyExists,
    SessionNotFound,
)
from app.events.log import SessionEventLog
from app.events.store import EventStore
from app.settings import Settings

from . import services
from .session import Session, SessionConfig
from .skills import skills_hook

PERMISSION_MODES = ("default", "plan", "bypass", "acceptEdits")


class SessionManager:
    def __init__(self, settings: Settings, registry: AgentRegistry, store: EventStore) -> None:
        self.settings = settings
        self.registry = registry
        self.store = store
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
                raise AgentNotInstalled(spec.id)
            for hook in CREATE_HOOKS:
                await hook(self, spec, request)
            config = self.normalise(spec, request)
            fs_root = os.getcwd()
            cwd = fs_root
            if config.directory:
                cwd = os.path.abspath(os.path.join(fs_root, os.path.expanduser(config.directory)))
                if not os.path.isdir(cwd):
                    raise InvalidRequest(f"directory not found: {cwd}")
            log = SessionEventLog(session_id, self.store)
            session = Session(session_id, spec, config, log, cwd=cwd, fs_root=fs_root, settings=self.settings)
            await session.start()
            self._sessions[session_id] = session
            return session
        finally:
            self._creating.discard(session_id)

    async def shutdown(self) -> None:
        sessions = [s for s in self._sessions.values() if s.process is not None]
        await asyncio.gather(*(s.shutdown() for s in sessions), return_exceptions=True)


# Async checks run at create before normalisation (legacy step 4: skills), in registration order.
CREATE_HOOKS: list[Any] = [skills_hook]
