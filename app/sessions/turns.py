"""A session's turns: one runs at a time (ACP agents take one prompt at a time), later ones wait
in order. Also which turn a JSON-RPC response from the agent answers (it ends that turn)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Turn:
    number: int
    turn_id: str
    message: str
    blocks: list[dict[str, Any]]
    user_parts: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)  # the session/prompt params
    response: dict[str, Any] | None = None  # the agent's answer to the prompt, as read from the wire
    ended: bool = False  # what ends the turn is recorded
    started: float = 0.0  # time.monotonic() at its start, when counted in the metrics
    counted: bool = False  # its end is counted in the metrics (and its span ended)
    trace_parent: Any = None  # the trace context of the request that sent it (tracing on)
    span: Any = None  # its span (tracing on)


class TurnQueue:
    """``begin`` runs synchronously when a turn starts (it records turn.started); ``run`` is the
    turn itself (it sends session/prompt and records turn.ended), in a task this queue owns."""

    def __init__(
        self,
        name: str,
        begin: Callable[[Turn], None],
        run: Callable[[Turn], Awaitable[None]],
    ) -> None:
        self._name = name
        self._begin = begin
        self._run = run
        self._count = 0
        self._task: asyncio.Task[None] | None = None
        self._queued: deque[Turn] = deque()
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._current: Turn | None = None  # the running turn
        # JSON-RPC ids of the session/prompt requests still waiting for their answer.
        self._prompts: dict[Any, Turn] = {}

    # ---- turns ---------------------------------------------------------------------------
    def new_turn(self, message: str, blocks: list[dict[str, Any]], user_parts: list[dict[str, Any]]) -> Turn:
        self._count += 1
        return Turn(self._count, f"turn_{self._count}", message, blocks, user_parts)

    def continue_numbering(self, count: int) -> None:
        """Turns of an earlier run of the session took the numbers up to ``count``."""
        self._count = max(self._count, count)

    def submit(self, turn: Turn) -> None:
        """Start ``turn`` now, or after the turns before it."""
        if self._task is None:
            self._start(turn)
        else:
            self._queued.append(turn)

    def _start(self, turn: Turn) -> None:
        self._idle.clear()
        self._current = turn
        self._begin(turn)
        self._task = asyncio.create_task(self._run_then_next(turn), name=f"turn-{self._name}-{turn.number}")

    async def _run_then_next(self, turn: Turn) -> None:
        try:
            await self._run(turn)
        finally:
            self._task = None
            self._current = None
            if self._queued and not self._closed:
                self._start(self._queued.popleft())
            else:
                self._queued.clear()
                self._idle.set()

    def close(self) -> None:
        """No more turns start (the session is ending); a running one goes on until cancelled."""
        self._closed = True
        self._queued.clear()

    async def cancel(self) -> None:
        """Cancel the running turn's task and wait for it."""
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def current(self) -> Turn | None:
        """The running turn."""
        return self._current

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    # ---- prompt responses ------------------------------------------------------------------
    def prompt_sent(self, request_id: Any) -> None:
        """The running turn's session/prompt goes out with this JSON-RPC id."""
        if self._current is not None:
            self._prompts[request_id] = self._current

    def response_read(self, message: dict[str, Any]) -> Turn | None:
        """A JSON-RPC response from the agent, in wire order: the turn whose prompt it answers
        (kept as that turn's ``response``), or None."""
        turn = self._prompts.pop(message.get("id"), None)
        if turn is not None:
            turn.response = message
        return turn
