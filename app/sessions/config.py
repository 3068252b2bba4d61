"""What a session is asked to be: the create request, normalised (and saved for a restart)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class SessionConfig:
    """What the create request asked for, normalised."""

    agent: str
    agent_mode: str
    permission_mode: str
    model: str | None
    variant: str | None
    agent_version: str | None = None
    directory: str | None = None
    title: str | None = None
    mcp: dict[str, Any] | None = None
    skills: dict[str, Any] | None = None
