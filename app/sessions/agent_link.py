"""A session's link to its agent: the process, the ACP connection, the handshake (`initialize`,
`session/new`, then the requested mode and model), the watch for the process's exit, and the stop.
It owns the watcher task; it records no events (the session does)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from app.acp.connection import AgentConnection, AgentObserver
from app.acp.orphans import ProcessRegistry
from app.acp.process import AgentProcess, ExitInfo
from app.acp.sdk import RequestError
from app.acp.shapes import NewSessionResult
from app.agents.node import version_of
from app.agents.registry import AgentSpec
from app.errors import AgentNotInstalled, AgentProcessExited, StreamError, Timeout
from app.metrics import Metrics
from app.settings import Settings
from app.tracing import Tracing
from app.translate.outgoing import session_new_params
from app.translate.session_translator import SessionState

from . import agent_setup
from .config import SessionConfig

log = logging.getLogger("acp_rest_bridge.sessions")

# How many of the agent's last stderr lines a failed start shows.
STDERR_HINT_LINES = 20


def new_session_params(config: SessionConfig, cwd: str, session_id: str) -> dict[str, Any]:
    """The `session/new` params for this config (also the base of `session/resume` and `session/load`)."""
    return session_new_params(
        cwd=cwd,
        session_id=session_id,
        agent=config.agent,
        agent_mode=config.agent_mode,
        permission_mode=config.permission_mode,
        model=config.model,
        variant=config.variant,
        agent_version=config.agent_version,
        title=config.title,
        skills=config.skills,
        mcp=config.mcp,
    )


@dataclass(slots=True)
class NewSession:
    """What the agent answered to `session/new`, and the exchange itself (session.started raw)."""

    native_session_id: str
    result: NewSessionResult
    raw: list[Any] = field(default_factory=list)


class AgentLink:
    def __init__(
        self,
        session_id: str,
        spec: AgentSpec,
        settings: Settings,
        processes: ProcessRegistry | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.session_id = session_id
        self.metrics = metrics
        self.tracing = tracing
        self._counted_exit = True  # no process to count yet
        self.spec = spec
        self.settings = settings
        self.processes = processes
        self.process: AgentProcess | None = None
        self.connection: AgentConnection | None = None
        self._stderr: str | None = None  # what a stopped process left on stderr
        # How the agent was configured (agent_setup): model, mode, the prompt prefix of its mode.
        self.setup: agent_setup.AgentSetup | None = None
        self._watcher: asyncio.Task[None] | None = None

    # ---- start ---------------------------------------------------------------------------
    async def start(
        self,
        observer: AgentObserver,
        capabilities: dict[str, Any],
        config: SessionConfig,
        cwd: str,
        state: SessionState,
    ) -> NewSession:
        """Spawn the agent and shake hands; on failure the process is stopped and the legacy error raised."""
        await self.spawn(observer, cwd)
        try:
            return await asyncio.wait_for(
                self._handshake(capabilities, config, cwd, state), self.settings.agent_start_timeout
            )
        except BaseException as exc:
            error = await self.start_failure(exc)
            await self.stop("start_failed")
            if error is None:
                raise
            raise error from exc

    async def spawn(self, observer: AgentObserver, cwd: str) -> None:
        """Start the agent process and its connection (no ACP request yet)."""
        argv = self.spec.command
        if not argv:
            raise AgentNotInstalled(self.spec.id)
        env = dict(self.spec.env)
        if self.spec.is_mock:
            env.setdefault("ACP_BRIDGE_MOCK_PACING_MS", str(self.settings.mock_pacing_ms))
            # Where the mock keeps its sessions, for session/load after a restart.
            env.setdefault("ACP_BRIDGE_MOCK_STATE_DIR", str(self.settings.resolved_data_dir() / "mock"))
        try:
            self.process = await AgentProcess.spawn(
                argv,
                env=env,
                cwd=cwd,
                stderr_line_limit=self.settings.stderr_line_limit,
                stdout_line_limit=self.settings.agent_line_limit,
                processes=self.processes,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise AgentNotInstalled(self.spec.id, {"message": str(exc)}) from exc
        if self.metrics is not None:
            self.metrics.agent_started(self.spec.id)
            self._counted_exit = False
        node = None if self.spec.is_mock else await asyncio.to_thread(self.spec.node_program)
        if node is not None:  # which Node.js runs it: the system's, or the bridge's own
            version = await version_of(node)
            agent = f"{self.spec.id} {self.spec.version}" if self.spec.version else self.spec.id
            log.info("%s: %s runs with Node.js %s (%s)", self.session_id, agent, version or "?", node)
        self.connection = AgentConnection(self.process, observer, self.tracing)
        if self.settings.transcript_dir is not None:
            self.connection.record_transcript(self.settings.transcript_dir, self.session_id)

    async def _handshake(
        self, capabilities: dict[str, Any], config: SessionConfig, cwd: str, state: SessionState
    ) -> NewSession:
        assert self.connection is not None
        await self.connection.initialize(capabilities)
        await agent_setup.authenticate(self.connection, self.spec, dict(self.connection.initialize_result))
        params = new_session_params(config, cwd, self.session_id)
        try:
            result = await self.connection.request("session/new", params)
        except RequestError as exc:
            if agent_setup.is_auth_refusal(exc.code):
                self.spec.started_with_credentials = False
                methods = self.connection.initialize_result.get("authMethods")
                error = agent_setup.credentials_error(self.spec, methods)
                if error.details is not None and "stderr" in (hints := self.failure_hints()):
                    error.details["stderr"] = hints["stderr"]
                raise error from exc
            raise
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise StreamError("agent answered session/new without a sessionId")
        self.spec.started_with_credentials = True
        request = {"jsonrpc": "2.0", "method": "session/new", "params": params}
        answer = cast(NewSessionResult, result)
        new = NewSession(answer["sessionId"], answer, [request, {"jsonrpc": "2.0", "result": result}])
        self.spec.learn(dict(self.connection.initialize_result), result)
        await self.apply_modes(new, config, state)
        return new

    async def apply_modes(self, new: NewSession, config: SessionConfig, state: SessionState) -> None:
        """Model, modes and variant as the create asked, through the agent's profile."""
        assert self.connection is not None
        result: dict[str, Any] = dict(new.result)  # fields still checked: the agent may send anything
        self.setup = await agent_setup.configure(self.connection, self.spec, config, new.native_session_id, result)
        agent_setup.attach(state, config, self.spec, self.setup, result)

    async def start_failure(self, exc: BaseException) -> Exception | None:
        """The legacy error for a failed start, once the process has had a moment to exit, with what
        helps to fix it: the agent's last stderr lines and, when the agent or its profile names
        them, the auth methods it offers and the variables that would give it credentials."""
        if isinstance(exc, TimeoutError):
            waited = self.settings.agent_start_timeout
            return Timeout(f"agent did not finish initialize/session/new in {waited}s", self.failure_hints())
        if isinstance(exc, ConnectionError | BrokenPipeError | ConnectionResetError):
            assert self.process is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 3.0)
            info = self.process.exit_info()
            code = info.code if info.code is not None else (-info.signal if info.signal else None)
            hints = {k: v for k, v in self.failure_hints().items() if k != "stderr"}
            return AgentProcessExited(self.spec.id, code, self.process.stderr.text(), hints)
        if isinstance(exc, RequestError):
            return StreamError(f"agent refused to start a session: {exc} ({exc.code})", self.failure_hints())
        return None

    def failure_hints(self) -> dict[str, Any]:
        """``stderr`` (its last lines), ``authMethods`` (ids, from ``initialize``) and ``variables``
        (any one of which would give it credentials), those that are known."""
        hints: dict[str, Any] = {}
        if self.process is not None and self.process.stderr.total_lines:
            hints["stderr"] = "\n".join(list(self.process.stderr.tail)[-STDERR_HINT_LINES:])
        methods = self.connection.initialize_result.get("authMethods") if self.connection is not None else None
        ids = [str(m.get("id")) for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []
        if ids:
            hints["authMethods"] = ids
        variables = self.spec.credential_variables()
        if variables and not self.spec.credentials_available():
            hints["variables"] = variables
        return hints

    # ---- running -------------------------------------------------------------------------
    def watch(self, on_exit: Callable[[ExitInfo], None], ended: Callable[[], bool]) -> None:
        """Call ``on_exit`` once the process has exited by itself and everything it wrote has been
        read; not when the session ``ended`` first."""
        self._watcher = asyncio.create_task(self._watch(on_exit, ended), name=f"session-watch-{self.session_id}")

    async def _watch(self, on_exit: Callable[[ExitInfo], None], ended: Callable[[], bool]) -> None:
        process, connection = self.process, self.connection  # (``stop`` lets go of them)
        assert process is not None and connection is not None
        await process.wait()
        if ended():
            return  # terminated: the connection is closed, no EOF to wait for
        # Everything the agent wrote before it died is processed before its death is recorded.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(connection.transport.eof.wait(), 2.0)
        if not ended():
            on_exit(process.exit_info())

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()

    @property
    def prompt_capabilities(self) -> dict[str, Any]:
        return self.connection.prompt_capabilities if self.connection is not None else {}

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.connection is not None
        return await self.connection.request(method, params)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        assert self.connection is not None
        await self.connection.notify(method, params)

    def stderr_text(self) -> str | None:
        return self.process.stderr.text() if self.process is not None else self._stderr

    # ---- stop ----------------------------------------------------------------------------
    async def close_session(self, native_session_id: str | None) -> None:
        """ACP `session/close`, when the agent offers it (``sessionCapabilities.close``): the agent
        ends its work on the session and frees it before its process is stopped. An answer later
        than ``session_close_timeout`` is given up: the request is withdrawn with `$/cancel_request`
        and the agent has a short moment (``cancel_grace``) to answer it. Never raises."""
        timeout = self.settings.session_close_timeout
        connection = self.connection
        if (
            timeout <= 0
            or connection is None
            or not native_session_id
            or not connection.session_capability("close")
            or (self.process is not None and self.process.returncode is not None)
        ):
            return
        call = connection.start_request("session/close", {"sessionId": native_session_id})
        try:
            await call.result(timeout)
        except TimeoutError:
            log.info("%s: session/close not answered in %ss", self.session_id, timeout)
            await call.withdraw()
            await call.settled(self.settings.cancel_grace)
        except asyncio.CancelledError:
            call.abandon()
            raise
        except Exception as exc:  # an error answer, a closed connection: the stop goes on
            log.info("%s: session/close failed: %s", self.session_id, exc)

    async def stop(self, reason: str = "stopped") -> None:
        """Close the connection, stop the process group, close the transcript. ``reason``: why the
        process ends, as counted (``exited``: by itself; ``terminated``, ``shutdown``, ...)."""
        if self.metrics is not None and not self._counted_exit:
            self._counted_exit = True
            self.metrics.agent_exited(self.spec.id, reason)
        if self.connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.connection.close(), 2.0)
        if self.process is not None:
            await self.process.stop(self.settings.agent_kill_grace)
        if self.connection is not None:
            await self.connection.close_transcript()
        # Let go of the process and the connection (their pipes, buffers, queues and the agent's
        # answers): an ended session keeps only its stderr text, for a later message's 500.
        if self.process is not None:
            self._stderr = self.process.stderr.text()
        self.process = self.connection = None
        self._watcher = None
