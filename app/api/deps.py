"""Access to the server's services from a request."""

from __future__ import annotations

from fastapi import Request

from app.agents.registry import AgentRegistry
from app.sessions.manager import SessionManager
from app.settings import Settings


def manager(request: Request) -> SessionManager:
    return request.app.state.manager  # type: ignore[no-any-return]


def registry(request: Request) -> AgentRegistry:
    return request.app.state.registry  # type: ignore[no-any-return]


def settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]
