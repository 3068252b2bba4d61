"""Imports every module that registers a client service or notification handler."""

from __future__ import annotations

from . import (
    agent_events,  # noqa: F401  (_sandbox-agent/error)
    cancellation,  # noqa: F401
    files,  # noqa: F401
    permissions,  # noqa: F401
    questions,  # noqa: F401
    terminals,  # noqa: F401
)
