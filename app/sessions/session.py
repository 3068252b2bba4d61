"""One legacy session: an ACP agent process, its connection, its translator and its event log."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.acp.connection import AgentConnection
from app.acp.orphans import ProcessRegistry
from app.acp.process import AgentProcess, ExitInfo
from app.acp.sdk import RequestError
from app.agents.registry import AgentSpec
from app.errors import AgentNotInstalled, AgentProcessExited, InvalidRequest, StreamError, Timeout
from app.events.log import SessionEventLog
from app.translate.drafts import ERROR, SESSION_ENDED, SESSION_STARTED, EventDraft
from app.translate.extensions import rpc_error_data
from app.translate.outgoing import mcp_servers as mcp_servers  # moved to translate/; kept importable here
from app.translate.outgoing import prompt_params, session_new_params
from app.translate.prompt import Attachment, prompt_blocks, user_item_parts
from app.translate.session import MOCK_USER_ITEM, SessionTranslator, UserItemStyle

from . import services

META = "sandbox-agent/"
# Set by ``recovery`` (which imports this module): a session suspended or continued after a restart.
RESUME_STATE = "recovery"
RESUME_META = "sandbox-agent/resume"
STOPPED_BY = "recovery.stopped"


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


@dataclass(slots=True)
class Turn:
    number: int
    turn_id: str
    message: str
    blocks: list[dict[str, Any]]
    user_parts: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)  # the session/prompt params


@dataclass(slots=True)
class PendingRequest:
    """An agent->client request waiting for the bridge or a user to answer."""

    request_id: Any
    method: str
    future: asyncio.Future[Any]
    cancel_result: Any  # what the agent gets if the request is cancelled
    data: dict[str, Any] = field(default_factory=dict)


class Session:
    def __init__(
        self,
        session_id: str,
        spec: AgentSpec,
        config: SessionConfig,
        log: SessionEventLog,
        *,
        cwd: str,
        fs_root: str,
        settings: Any,
        processes: ProcessRegistry | None = None,
    ) -> None:
        self.id = session_id
        self.spec = spec
        self.config = config
        self.log = log
        self.cwd = cwd
        self.fs_root = fs_root
        self.settings = settings
        self.processes = processes  # where agent and terminal process groups are recorded
        self.created_at_ms = int(time.time() * 1000)
        self.translator = SessionTranslator(user_item=MOCK_USER_ITEM if spec.is_mock else UserItemStyle())
        self.process: AgentProcess | None = None
        self.connection: AgentConnection | None = None
        self.native_session_id: str | None = None
        self.new_session_result: dict[str, Any] = {}
        self._new_session_raw: list[Any] = []  # session/new request and response (session.started raw)
        self.ended = False
        self.end_reason: str | None = None
        self.exit_info: ExitInfo | None = None
        # Set at server shutdown: cancel hooks answer the agent but record nothing.
        self.shutting_down = False
        self.pending: dict[Any, PendingRequest] = {}
        # True while an agent replays history (ACP session/load) until the next prompt: those
        # updates were logged when they happened and are not logged again.
        self.replaying = False
        self.replayed = 0
        # Feature areas (permissions, questions, terminals...) keep per-session state here.
        self.extensions: dict[str, Any] = {}
        self._started = False
        self._early: list[EventDraft] = []
        self._turns = 0
        self._turn_task: asyncio.Task[None] | None = None
        self._queued: deque[Turn] = deque()
        self._prompt_request_ids: set[Any] = set()
        self._responses: dict[Any, dict[str, Any]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._last_prompt_id: Any = None
        self._idle = asyncio.Event()
        self._idle.set()

    # ---- recording -----------------------------------------------------------------------
    def record(self, drafts: list[EventDraft]) -> None:
        """Append drafts to the log now (never awaits, so wire order is kept)."""
        if not self._started:
            self._early.extend(drafts)
            return
        for draft in drafts:
            self.log.append(draft)

    def record_one(self, event_type: str, data: dict[str, Any], *, synthetic: bool, raw: Any = None) -> None:
        self.record([EventDraft(event_type, data, synthetic=synthetic, raw=raw)])

    # ---- start-up ------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the agent, `initialize`, `session/new`; record session.started."""
        await self.spawn()
        try:
            await asyncio.wait_for(self._handshake(), self.settings.agent_start_timeout)
        except BaseException as exc:
            error = await self._start_failure(exc)
            await self._stop_process()
            if error is None:
                raise
            raise error from exc
        self._watcher = asyncio.create_task(self._watch_process(), name=f"session-watch-{self.id}")
        self._started = True
        self.log.native_session_id = self.native_session_id
        metadata = {
            "agent": self.config.agent,
            "agentMode": self.config.agent_mode,
            "model": self.config.model,
            "permissionMode": self.config.permission_mode,
            "variant": self.config.variant,
        }
        raw = self._new_session_raw or None
        self.log.append(EventDraft(SESSION_STARTED, {"metadata": metadata}, synthetic=True, raw=raw))
        early, self._early = self._early, []
        for draft in early:
            self.log.append(draft)

    async def spawn(self) -> None:
        """Start the agent process and its connection (no ACP request yet)."""
        argv = self.spec.command
        if not argv:
            raise AgentNotInstalled(self.spec.id)
        env = dict(self.spec.env)
        if self.spec.is_mock:
            env.setdefault("ACP_BRIDGE_MOCK_PACING_MS", str(self.settings.mock_pacing_ms))
            # Where the mock keeps its sessions for session/load after a restart.
            env.setdefault("ACP_BRIDGE_MOCK_STATE_DIR", str(self.settings.resolved_data_dir() / "mock"))
        try:
            self.process = await AgentProcess.spawn(
                argv,
                env=env,
                cwd=self.cwd,
                stderr_line_limit=self.settings.stderr_line_limit,
                processes=self.processes,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise AgentNotInstalled(self.spec.id, {"message": str(exc)}) from exc
        self.connection = AgentConnection(self.process, self)
        if self.settings.transcript_dir is not None:
            self.connection.record_transcript(self.settings.transcript_dir, self.id)

    async def _handshake(self) -> None:
        assert self.connection is not None
        await self.connection.initialize(services.client_capabilities(self.spec.disabled_services))
        config = self.config
        params = session_new_params(
            cwd=self.cwd,
            session_id=self.id,
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
        result = await self.connection.request("session/new", params)
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise StreamError("agent answered session/new without a sessionId")
        request = {"jsonrpc": "2.0", "method": "session/new", "params": params}
        self._new_session_raw = [request, {"jsonrpc": "2.0", "result": result}]
        self.new_session_result = result
        self.native_session_id = result["sessionId"]
        self.spec.learn(self.connection.initialize_result, result)
        await self._apply_modes(result)

    async def _apply_modes(self, result: dict[str, Any]) -> None:
        """Ask the agent for the requested mode/model when it offers them (session/new result)."""
        assert self.connection is not None
        modes = result.get("modes")
        if isinstance(modes, dict):
            current = modes.get("currentModeId")
            available = {m.get("id") for m in modes.get("availableModes") or [] if isinstance(m, dict)}
            self.translator.state.mode = current if isinstance(current, str) else None
            wanted = self.config.agent_mode
            if wanted in available and wanted != current:
                await self.connection.request(
                    "session/set_mode", {"sessionId": self.native_session_id, "modeId": wanted}
                )
                self.translator.state.mode = wanted
        options = result.get("configOptions")
        if isinstance(options, list):
            for option in options:
                if not isinstance(option, dict) or option.get("category") != "model":
                    continue
                values = {o.get("value") for o in option.get("options") or [] if isinstance(o, dict)}
                wanted_model = self.config.model
                if wanted_model in values and wanted_model != option.get("currentValue"):
                    await self.connection.request(
                        "session/set_config_option",
                        {"sessionId": self.native_session_id, "configId": option.get("id"), "value": wanted_model},
                    )

    async def _start_failure(self, exc: BaseException) -> Exception | None:
        """The legacy error for a failed start, once the process has had a moment to exit."""
        if isinstance(exc, TimeoutError):
            return Timeout(f"agent did not finish initialize/session/new in {self.settings.agent_start_timeout}s")
        if isinstance(exc, ConnectionError | BrokenPipeError | ConnectionResetError):
            assert self.process is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 3.0)
            info = self.process.exit_info()
            code = info.code if info.code is not None else (-info.signal if info.signal else None)
            return AgentProcessExited(self.spec.id, code, self.process.stderr.text())
        if isinstance(exc, RequestError):
            return StreamError(f"agent refused to start a session: {exc} ({exc.code})")
        if isinstance(exc, Exception) and not isinstance(exc, asyncio.CancelledError):
            return None
        return None

    # ---- messages and turns ---------------------------------------------------------------
    def check_accepting(self) -> None:
        if self.ended:
            if self.end_reason == "terminated":
                raise InvalidRequest("session terminated")
            code = self.exit_info.code if self.exit_info else None
            raise AgentProcessExited(self.spec.id, code, self.process.stderr.text() if self.process else None)

    def send_message(self, message: str, attachments: list[Attachment]) -> str:
        """Accept a message: its turn starts now (turn.started recorded before returning) or after
        the turn in flight, since ACP agents take one prompt at a time. Returns the turn's id."""
        self.check_accepting()
        assert self.connection is not None
        image_capable = bool(self.connection.prompt_capabilities.get("image"))
        image_data: dict[str, bytes] = {}
        if image_capable:
            for attachment in attachments:
                mime = attachment.mime_type
                if mime and mime.startswith("image/"):
                    with contextlib.suppress(OSError):
                        with open(attachment.path, "rb") as fh:
                            image_data[attachment.path] = fh.read()
        self._turns += 1
        turn = Turn(
            number=self._turns,
            turn_id=f"turn_{self._turns}",
            message=message,
            blocks=prompt_blocks(message, attachments, image_capable=image_capable, image_data=image_data),
            user_parts=user_item_parts(attachments),
        )
        if self._turn_task is None:
            self._start_turn(turn)
        else:
            self._queued.append(turn)
        return turn.turn_id

    def _start_turn(self, turn: Turn) -> None:
        self._idle.clear()
        turn.params = prompt_params(self.native_session_id, turn.blocks, turn.turn_id)
        raw = {"jsonrpc": "2.0", "method": "session/prompt", "params": turn.params}
        self.record(self.translator.turn_started(turn.turn_id, turn.message, turn.user_parts, raw=raw))
        self._turn_task = asyncio.create_task(self._run_turn(turn), name=f"turn-{self.id}-{turn.number}")

    async def _run_turn(self, turn: Turn) -> None:
        assert self.connection is not None
        try:
            try:
                result = await self.connection.request("session/prompt", turn.params)
            except RequestError as exc:
                raw = self._responses.pop(self._last_prompt_id, None) if self._last_prompt_id is not None else None
                self.record_one(ERROR, rpc_error_data(exc.code, str(exc), exc.data), synthetic=True, raw=raw)
                self.record(self.translator.turn_ended(turn.turn_id, {"stopReason": "error"}, raw=None))
                return
            except (ConnectionError, OSError):
                return  # the agent is gone: the process watcher records what happened
            stop = result.get("stopReason") if isinstance(result, dict) else None
            metadata: dict[str, Any] = {"stopReason": stop}
            if isinstance(result, dict) and isinstance(result.get("_meta"), dict):
                metadata["meta"] = result["_meta"]
            raw = self._responses.pop(self._last_prompt_id, None) if self._last_prompt_id is not None else None
            self.record(self.translator.turn_ended(turn.turn_id, metadata, raw=raw))
        finally:
            self._turn_task = None
            if self._queued and not self.ended:
                self._start_turn(self._queued.popleft())
            else:
                self._queued.clear()
                self._idle.set()

    @property
    def turn_running(self) -> bool:
        return self._turn_task is not None

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    # ---- AgentObserver ---------------------------------------------------------------------
    def on_incoming(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "session/update":
            if self.replaying:
                self.replayed += 1
                return
            for observer in services.UPDATE_OBSERVERS:
                observer(self, message)
            self.record(self.translator.session_update(message.get("params"), message))
        elif isinstance(method, str) and "id" in message:
            service = services.SERVICES.get(method)
            if service is not None and service.observe is not None:
                service.observe(self, message)
        elif isinstance(method, str):
            handler = services.NOTIFICATIONS.get(method)
            if handler is not None:
                handler(self, message)
            elif not method.startswith("_"):  # unknown extension notifications are ignored (ACP)
                self.record(self.translator.unparsed(f"unknown notification: {method}", "agent.stdout", message))
        elif "id" in message and ("result" in message or "error" in message):
            if message.get("id") in self._prompt_request_ids:
                self._prompt_request_ids.discard(message["id"])
                self._responses[message["id"]] = message
        else:
            self.record(self.translator.unparsed("not a JSON-RPC message", "agent.stdout", message))

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        text = line.decode("utf-8", "replace")
        self.record(self.translator.unparsed(error, "agent.stdout", text))

    def on_outgoing(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "session/prompt":
            self.replaying = False
            self._last_prompt_id = message.get("id")
            self._prompt_request_ids.add(message.get("id"))
        elif method == "session/cancel":
            # ACP: after session/cancel the client answers every pending request as cancelled.
            self.cancel_pending()

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        service = services.SERVICES.get(method)
        if service is None or method in self.spec.disabled_services:
            raise RequestError.method_not_found(method)
        return await service.handle(self, params, request_id)

    # ---- pending agent requests ------------------------------------------------------------
    def add_pending(self, key: Any, pending: PendingRequest) -> None:
        self.pending[key] = pending

    def cancel_pending(self) -> None:
        """Answer every request still waiting with its cancel result (ACP requires it on cancel)."""
        for key in list(self.pending):
            self.cancel_one(key)

    def cancel_one(self, key: Any) -> bool:
        """Answer one waiting request with its cancel result; False if nothing waits under ``key``."""
        pending = self.pending.pop(key, None)
        if pending is None:
            return False
        if not pending.future.done():
            pending.future.set_result(pending.cancel_result)
        for hook in CANCEL_HOOKS:
            hook(self, key, pending)
        return True

    # ---- ending ----------------------------------------------------------------------------
    async def terminate(self) -> None:
        """Legacy terminate: cancel the turn, answer pending requests, stop the process group,
        record exactly one session.ended. Idempotent."""
        if self.ended:
            if self._stopping is not None:
                await asyncio.shield(self._stopping)
            return
        self.ended = True
        self.end_reason = "terminated"
        self._queued.clear()
        if self._turn_task is not None and self.connection is not None:
            with contextlib.suppress(Exception):
                await self.connection.notify("session/cancel", {"sessionId": self.native_session_id})
            self.cancel_pending()
            await self.wait_idle(self.settings.cancel_grace)
        self.cancel_pending()
        self.record(self.translator.flush())
        self.record_one(SESSION_ENDED, {"reason": "terminated", "terminated_by": "daemon"}, synthetic=True)
        self._stopping = asyncio.create_task(self._stop_process())
        await asyncio.shield(self._stopping)

    async def _stop_process(self) -> None:
        for hook in END_HOOKS:
            with contextlib.suppress(Exception):
                await hook(self)
        if self.connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.connection.close(), 2.0)
        if self.process is not None:
            await self.process.stop(self.settings.agent_kill_grace)
        if self.connection is not None:
            await self.connection.close_transcript()
        if self._turn_task is not None:
            self._turn_task.cancel()
            with contextlib.suppress(BaseException):
                await self._turn_task

    async def _watch_process(self) -> None:
        assert self.process is not None and self.connection is not None
        await self.process.wait()
        if self.ended:
            return  # terminated: the connection is closed, no EOF to wait for
        # Everything the agent wrote before it died is processed before its death is recorded.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connection.transport.eof.wait(), 2.0)
        if self.ended:
            return
        self.ended = True
        self.end_reason = "error"
        self.exit_info = self.process.exit_info()
        self.cancel_pending()
        message = self.exit_info.description
        self.record(self.translator.flush())
        self.record_one(ERROR, {"message": message, "code": "process_exit", "details": None}, synthetic=True)
        ended: dict[str, Any] = {"reason": "error", "terminated_by": "agent", "message": message}
        ended["exit_code"] = self.exit_info.code if self.exit_info.code is not None else -(self.exit_info.signal or 0)
        ended["stderr"] = self.process.stderr.output()
        self.record_one(SESSION_ENDED, ended, synthetic=True)
        self._stopping = asyncio.create_task(self._stop_process())

    async def shutdown(self) -> None:
        """Server shutdown: stop the agent without recording anything more. A live session is
        suspended, not ended: the next server continues it (``recovery``)."""
        if self._watcher is not None:
            self._watcher.cancel()
        if not self.ended:
            self.extensions[STOPPED_BY] = "shutdown"
        self.ended = True
        self.shutting_down = True
        self.cancel_pending()
        await self._stop_process()

    # ---- SessionInfo -------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        state = self.translator.state
        info: dict[str, Any] = {
            "sessionId": self.id,
            "agent": self.config.agent,
            "agentMode": state.agent_mode or self.config.agent_mode,
            "permissionMode": self.config.permission_mode,
            "model": state.model or self.config.model,
            "variant": self.config.variant,
            "nativeSessionId": self.native_session_id,
            "ended": self.ended,
            "eventCount": self.log.count,
            "createdAt": self.created_at_ms,
            "updatedAt": max(self.created_at_ms, self.log.updated_ns // 1_000_000, state.updated_at_ms or 0),
            "directory": self.config.directory,
            "title": state.title if state.title_set else self.config.title,
        }
        if self.config.mcp is not None:
            info["mcp"] = self.config.mcp
        if self.config.skills is not None:
            info["skills"] = self.config.skills
        resume = self.extensions.get(RESUME_STATE)
        if resume is not None:  # went through a bridge restart (``recovery``)
            info["_meta"] = {RESUME_META: resume.info()}
        return info


# Called for each pending request when it is cancelled: (session, key, pending). Feature areas
# record their resolved events here.
CANCEL_HOOKS: list[Callable[[Session, Any, PendingRequest], None]] = []
# Awaited when the session's agent is being stopped (terminate, agent exit, server shutdown), before
# the process group is killed: release what the session holds (terminals, files).
END_HOOKS: list[Callable[[Session], Awaitable[None]]] = []


def server_cwd() -> str:
    return os.getcwd()
