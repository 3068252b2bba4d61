"""A session's saved record read back (at a restart, or in a fleet from another bridge's save):
what a ``Session`` or a ``RemoteSession`` is built from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.acp.process import ExitInfo
from app.agents.registry import AgentSpec
from app.translate.usage import USAGE_META

from .config import SessionConfig
from .phases import EndReason


@dataclass(slots=True)
class SavedSession:
    session_id: str
    spec: AgentSpec
    config: SessionConfig
    cwd: str
    fs_root: str
    created_at_ms: int
    native_session_id: str | None
    ended: bool
    end_reason: EndReason  # how it ended, when it did
    exit_info: ExitInfo | None
    info: dict[str, Any]  # the SessionInfo it was saved with
    usage: Any = None  # its tokens and cost so far, as SessionInfo showed them (``translate/usage.py``)
    agent_cost: Any = None  # the agent's running cost as last seen

    @classmethod
    def read(cls, record: dict[str, Any], spec_of: Callable[[str], AgentSpec]) -> SavedSession:
        """``spec_of``: the agent's spec by id. Raises KeyError, TypeError or ValueError for a
        record that is not one."""
        info = record["info"]
        config = SessionConfig(**record["config"])
        # What the agent reported (model, title) wins, as in SessionInfo.
        config.model = info.get("model")
        config.title = info.get("title")
        return cls(
            session_id=info["sessionId"],
            spec=spec_of(config.agent),
            config=config,
            cwd=record["cwd"],
            fs_root=record["fs_root"],
            created_at_ms=int(info["createdAt"]),
            native_session_id=info.get("nativeSessionId"),
            ended=record.get("endReason") is not None,
            end_reason=end_reason(record),
            exit_info=exit_info(record),
            info=info,
            usage=meta.get(USAGE_META) if isinstance(meta := info.get("_meta"), dict) else None,
            agent_cost=record.get("agentCost"),
        )


def end_reason(record: dict[str, Any]) -> EndReason:
    return "error" if record.get("endReason") == "error" else "terminated"


def exit_info(record: dict[str, Any]) -> ExitInfo | None:
    saved = record.get("exit")
    return ExitInfo(saved.get("code"), saved.get("signal")) if isinstance(saved, dict) else None
