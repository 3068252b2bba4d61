"""Access to the server's services from a request."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from app.agents.registry import AgentRegistry
from app.sessions.manager import SessionManager
from app.settings import Settings


def manager(request: Request) -> SessionManager:
    manager: SessionManager = request.app.state.manager
    return manager


def registry(request: Request) -> AgentRegistry:
    registry: AgentRegistry = request.app.state.registry
    return registry


def settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def stopping(request: Request) -> Callable[[], bool]:
    """Whether the server has begun to stop (``Services.stopping``)."""
    stopping: Callable[[], bool] = request.app.state.stopping
    return stopping
