"""``/v1/agents/{agent}/models`` before any session ran: start the agent once, in a scratch
directory, to ask it (``initialize``, ``authenticate`` when needed, ``session/new``), as legacy asked
codex's app-server and opencode's server. What it tells is kept on the agent (``AgentSpec.learn``)
and refreshed by every later session. When the agent cannot be asked (not installed, no
credentials, an error, a time-out), the profile's fallback list answers, and the probe is not
repeated for a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from typing import Any

from app.acp.connection import AgentConnection
from app.acp.process import AgentProcess
from app.acp.sdk import RequestError
from app.agents.registry import AgentSpec
from app.process_group import Recorder

from . import agent_setup

log = logging.getLogger("acp_rest_bridge.sessions")

RETRY_AFTER = 60.0
CLOSE_TIMEOUT = 2.0  # seconds the probe waits for `session/close`
_locks: dict[str, asyncio.Lock] = {}
_failed_at: dict[str, float] = {}


class _Silent:
    """The probe's observer: it records nothing and serves no client method."""

    def on_incoming(self, message: dict[str, Any]) -> None:
        pass

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        pass

    def on_outgoing(self, message: dict[str, Any]) -> None:
        pass

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        raise RequestError.method_not_found(method)


async def agent_models(spec: AgentSpec, settings: Any, processes: Recorder | None = None) -> dict[str, Any]:
    """The agent's models: learned, else asked now (once, the agent's process group recorded with
    ``processes``), else the profile's fallback."""
    if spec.models is None and not spec.is_mock and spec.profile.probe_models and spec.installed:
        lock = _locks.setdefault(spec.id, asyncio.Lock())
        async with lock:
            recent = time.monotonic() - _failed_at.get(spec.id, -RETRY_AFTER) < RETRY_AFTER
            if spec.models is None and not recent:
                try:
                    await asyncio.wait_for(_probe(spec, settings, processes), settings.agent_start_timeout)
                except Exception as exc:  # the fallback answers; the reason goes to the log
                    _failed_at[spec.id] = time.monotonic()
                    log.warning("could not ask %s for its models: %s", spec.id, exc)
    return spec.models_response()


async def _probe(spec: AgentSpec, settings: Any, processes: Recorder | None) -> None:
    assert spec.command
    with tempfile.TemporaryDirectory(prefix="acp-bridge-probe-") as cwd:
        process = await AgentProcess.spawn(
            spec.command, env=spec.env, cwd=cwd, stderr_line_limit=settings.stderr_line_limit, processes=processes
        )
        connection = AgentConnection(process, _Silent())
        try:
            await connection.initialize({})  # it is only asked what it offers: no client methods served
            await agent_setup.authenticate(connection, spec, dict(connection.initialize_result))
            result = await connection.request("session/new", {"cwd": cwd, "mcpServers": []})
            if isinstance(result, dict):
                spec.learn(dict(connection.initialize_result), result)
                if connection.session_capability("close") and isinstance(result.get("sessionId"), str):
                    # The scratch session is closed (ACP session/close) before the agent is stopped.
                    with contextlib.suppress(Exception):
                        await connection.request("session/close", {"sessionId": result["sessionId"]}, CLOSE_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), 2.0)
            await process.stop(settings.agent_kill_grace)
