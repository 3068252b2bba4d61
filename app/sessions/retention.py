"""Retention: ended sessions not updated for ``retention_days`` are deleted, at start and daily."""

from __future__ import annotations

import asyncio
import logging
import time

from .manager import SessionManager

log = logging.getLogger("acp_rest_bridge.sessions")

DAY = 86_400.0


def prune(manager: SessionManager, days: float, now_ms: int | None = None) -> list[str]:
    """Delete the ended sessions last updated more than ``days`` ago; their ids."""
    if days <= 0:
        return []
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now_ms - int(days * DAY * 1000)
    gone = [s.id for s in manager.list() if s.ended and s.info()["updatedAt"] < cutoff]
    for session_id in gone:
        manager.forget(session_id)
    if gone:
        log.info("retention: deleted %d ended sessions older than %g days", len(gone), days)
    return gone


async def run(manager: SessionManager, days: float, interval: float = DAY) -> None:
    """Prune now, then every ``interval`` seconds, until cancelled (server stop)."""
    while True:
        try:
            prune(manager, days)
        except Exception:
            log.exception("retention: pruning failed")
        await asyncio.sleep(interval)
