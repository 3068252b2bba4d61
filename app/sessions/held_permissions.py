"""Permission requests that arrive before the tool call they are about.

An agent that announces each tool call before asking permission for it (its profile says so) can
still send the two in the other order (claude-agent-acp, about 1 in 20). The request's own tool call
then lacks the vendor tool name, so its action, metadata and always-allow keys would differ from run
to run. Such a request is held until its ``tool_call`` arrives, at most :data:`HOLD_SECONDS`, and
then handled as if it had come right after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HOLD_SECONDS = 2.0


@dataclass(slots=True)
class _Held:
    request_id: Any
    release: Callable[[], None]
    done: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None


class HeldRequests:
    """One session's held permission requests, by tool call id."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def hold(self, call_id: str, message: dict[str, Any], release: Callable[[], None]) -> None:
        entry = _Held(message.get("id"), release)
        self._held[call_id] = entry
        entry.timer = asyncio.get_running_loop().call_later(HOLD_SECONDS, self._release, call_id)

    def announced(self, call_id: Any) -> None:
        """The tool call is known: release its request once this update has been translated."""
        if self._held and isinstance(call_id, str) and call_id in self._held:
            asyncio.get_running_loop().call_soon(self._release, call_id)

    def _release(self, call_id: str) -> None:
        entry = self._held.pop(call_id, None)
        if entry is None:
            return
        if entry.timer is not None:
            entry.timer.cancel()
        try:
            entry.release()
        finally:
            entry.done.set()

    async def released(self, request_id: Any) -> None:
        """Wait until a held request with this JSON-RPC id has been handled (no-op otherwise)."""
        for entry in list(self._held.values()):
            if entry.request_id == request_id:
                await asyncio.wait_for(entry.done.wait(), HOLD_SECONDS + 5)
                return
