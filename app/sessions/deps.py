"""What every session of a server is built with: the shared services, in one object."""

from __future__ import annotations

from dataclasses import dataclass

from app.acp.orphans import ProcessRegistry
from app.metrics import Metrics
from app.settings import Settings
from app.tracing import Tracing

from .client_services import ClientServices


@dataclass(frozen=True, slots=True)
class SessionDeps:
    """Made once by the ``SessionManager``; every ``Session`` it makes or restores gets the same."""

    settings: Settings
    services: ClientServices  # what the bridge answers when an agent asks
    processes: ProcessRegistry | None = None  # where agent and terminal process groups are recorded
    metrics: Metrics | None = None
    tracing: Tracing | None = None
