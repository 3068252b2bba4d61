"""What a session shows and keeps: its legacy SessionInfo (``info``) and the record saved for a
restarted server (``saved_record``; read back as a ``SavedSession``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from app.acp.process import ExitInfo
from app.translate.usage import USAGE_META

from . import recovery
from .config import SessionConfig
from .recovery import RecoveryHost
from .remote import BRIDGE_META


class InfoHost(RecoveryHost, Protocol):
    """What the SessionInfo and the record are made of besides what recovery keeps."""

    @property
    def created_at_ms(self) -> int: ...
    @property
    def fs_root(self) -> str: ...
    @property
    def exit_info(self) -> ExitInfo | None: ...
    @property
    def runner(self) -> str | None: ...  # in a fleet: this bridge's advertised address


def saved_record(session: InfoHost) -> dict[str, Any]:
    """What is saved of a session: enough to list it again after a restart (its events are in
    the log)."""
    exit_info = session.exit_info
    return {
        "info": info(session),
        "config": dataclasses.asdict(session.config),
        "cwd": session.cwd,
        "fs_root": session.fs_root,
        "endReason": session.end_reason,
        "exit": None if exit_info is None else {"code": exit_info.code, "signal": exit_info.signal},
        **recovery.record_fields(session),
    }


def info(session: InfoHost) -> dict[str, Any]:
    """The legacy SessionInfo."""
    state = session.state  # (kept when an ended session sheds its translator)
    info: dict[str, Any] = {
        "sessionId": session.id,
        "agent": session.config.agent,
        "agentMode": state.agent_mode or session.config.agent_mode,
        "permissionMode": session.config.permission_mode,
        "model": state.model or session.config.model,
        "variant": session.config.variant,
        "nativeSessionId": session.native_session_id,
        "ended": session.ended,
        "eventCount": session.log.count,
        "createdAt": session.created_at_ms,
        "updatedAt": max(session.created_at_ms, session.log.updated_ns // 1_000_000, state.updated_at_ms or 0),
        "directory": session.config.directory,
        "title": state.title if state.title_set else session.config.title,
    }
    if session.config.mcp is not None:
        info["mcp"] = session.config.mcp
    if session.config.skills is not None:
        info["skills"] = session.config.skills
    used = state.totals.info()
    if used is not None:  # tokens and cost over the session's turns
        info["_meta"] = {USAGE_META: used}
    if session.recovery is not None:  # went through a bridge restart while live
        info["_meta"] = {**info.get("_meta", {}), recovery.META: session.recovery.info()}
    if session.runner is not None:
        info["_meta"] = {**info.get("_meta", {}), BRIDGE_META: {"url": session.runner}}
    return info


def started_metadata(config: SessionConfig) -> dict[str, Any]:
    """The metadata of ``session.started``: what the create asked for."""
    return {
        "agent": config.agent,
        "agentMode": config.agent_mode,
        "model": config.model,
        "permissionMode": config.permission_mode,
        "variant": config.variant,
    }
