"""The built-in `mock` ACP agent: a real agent process speaking ACP v1 over stdio.

It plays the legacy mock script (``script.py``) as ACP traffic. It uses only the standard library so
that a mock session starts in tens of milliseconds (the SDK's models take about a second to import).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any
from urllib.parse import unquote

from . import memory
from .commands import script_for
from .script import Context, Step


def prompt_text(blocks: list[dict[str, Any]]) -> str:
    """The prompt as the legacy mock saw it: the text, then its attachments listed (behavior §3.8)."""
    text = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
    paths = [
        _given_path(block)
        for block in blocks
        if block.get("type") in ("resource_link", "image") and isinstance(block.get("uri"), str)
    ]
    if paths:
        text += "\n\nAttachments:\n" + "".join(f"- {path}\n" for path in paths)
    return text


def _given_path(block: dict[str, Any]) -> str:
    """The path as the client gave it (the bridge's ``_meta``), else the file URI's path."""
    meta = block.get("_meta")
    given = meta.get("sandbox-agent/path") if isinstance(meta, dict) else None
    return given if isinstance(given, str) else unquote(block["uri"].removeprefix("file://"))


PROTOCOL_VERSION = 1
LINE_LIMIT = 64 * 1024 * 1024
# Methods (comma-separated) the mock answers only once the client withdraws them with
# `$/cancel_request` (then with -32800), for tests of a client that gives up on a request.
STALL_ENV = "ACP_BRIDGE_MOCK_STALL"
STALL_LIMIT = 60.0  # seconds a stalled request waits at most
REQUEST_CANCELLED = -32800


class MockAgent:
    def __init__(self, reader: asyncio.StreamReader, writer: Any, pace_ms: int) -> None:
        self._reader = reader
        self._writer = writer
        self._pace = pace_ms / 1000.0
        self._write_lock = asyncio.Lock()
        self._next_id = 0
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sessions: dict[str, dict[str, Any]] = {}
        self._cancelled: set[str] = set()
        self.client_capabilities: dict[str, Any] = {}
        # Client requests being handled, by id: set when the client withdraws one ($/cancel_request).
        self._withdrawn: dict[Any, asyncio.Event] = {}
        self._stall = set(filter(None, os.environ.get(STALL_ENV, "").split(",")))

    # ---- wire ----------------------------------------------------------------------------
    async def write_line(self, data: bytes) -> None:
        async with self._write_lock:
            self._writer.write(data + b"\n")
            await self._writer.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.write_line(json.dumps(message, separators=(",", ":")).encode())

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def send_request(self, method: str, params: Any) -> asyncio.Future[Any]:
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return future

    async def request(self, method: str, params: Any) -> Any:
        return await (await self.send_request(method, params))

    async def serve(self) -> None:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line:
                    break
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "method" in message:
                task = asyncio.create_task(self._handle(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif "id" in message:
                future = self._pending.pop(message["id"], None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_result({"_error": message["error"]})
                    else:
                        future.set_result(message.get("result"))
        for future in self._pending.values():
            if not future.done():
                future.set_result({"_error": {"code": -32603, "message": "connection closed"}})

    async def _handle(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params") or {}
        is_request = "id" in message
        if is_request:
            self._withdrawn[message["id"]] = asyncio.Event()
        try:
            try:
                if is_request and method in self._stall:
                    await self._stalled(message["id"])
                result = await self._dispatch(method, params)
            except _RpcError as exc:
                if is_request:
                    await self.send({"jsonrpc": "2.0", "id": message["id"], "error": exc.error})
                return
            if is_request:
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            if method == "session/prompt":
                await self._after_prompt(params.get("sessionId", ""))
        except (ConnectionError, OSError):
            os._exit(0)  # the client went away: nothing left to talk to
        finally:
            if is_request:
                self._withdrawn.pop(message["id"], None)

    async def _stalled(self, request_id: Any) -> None:
        """Answer nothing until the client withdraws the request; then ACP's -32800."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._withdrawn[request_id].wait(), STALL_LIMIT)
        raise _RpcError(REQUEST_CANCELLED, "Request cancelled")

    # ---- agent methods -------------------------------------------------------------------
    async def _dispatch(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            self.client_capabilities = params.get("clientCapabilities") or {}
            return {
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": memory.state_dir() is not None,
                    "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                    "mcpCapabilities": {"http": False, "sse": False},
                    # session/list needs the sessions kept on disk; session/close always works.
                    "sessionCapabilities": {"close": {}, **({"list": {}} if memory.state_dir() else {})},
                },
                "agentInfo": {"name": "mock", "title": "Mock agent", "version": "builtin"},
                "authMethods": [],
            }
        if method == "session/new":
            meta = params.get("_meta") or {}
            legacy_id = meta.get("sandbox-agent/sessionId")
            session_id = f"mock-{legacy_id}" if legacy_id else f"mock-{len(self._sessions) + 1}"
            memory.forget(session_id)
            memory.begin(session_id, params.get("cwd"))
            self._open_session(session_id, params, [])
            return self._session_result(session_id)
        if method == "session/load":
            loaded = params.get("sessionId")
            turns = memory.load(loaded) if isinstance(loaded, str) else None
            if turns is None or not isinstance(loaded, str):
                raise _RpcError(-32002, f"Resource not found: session {loaded}")
            session_id = loaded
            self._open_session(session_id, params, turns)
            # ACP: the whole history as session/update notifications, before the answer.
            for update in memory.replay(session_id, turns):
                await self.notify("session/update", update)
            result = self._session_result(session_id)
            del result["sessionId"]  # a load result has modes and config options only
            return result
        if method == "session/prompt":
            return await self._prompt(params)
        if method == "session/cancel":
            self._cancelled.add(params.get("sessionId", ""))
            return None
        if method == "$/cancel_request":
            withdrawn = self._withdrawn.get(params.get("requestId"))
            if withdrawn is not None:
                withdrawn.set()
            return None
        if method == "session/close":
            # ACP: running work stops as after session/cancel; the session is gone from this process
            # (its memory on disk stays, for session/load).
            self._session(params)
            self._cancelled.add(params["sessionId"])
            self._sessions.pop(params["sessionId"], None)
            return {}
        if method == "session/list":
            cwd = params.get("cwd")
            listed = [entry for entry in memory.sessions() if cwd is None or entry.get("cwd") == cwd]
            return {"sessions": listed}
        if method == "session/set_mode":
            session = self._session(params)
            session["mode"] = params.get("modeId")
            await self.notify(
                "session/update",
                {
                    "sessionId": params["sessionId"],
                    "update": {"sessionUpdate": "current_mode_update", "currentModeId": params.get("modeId")},
                },
            )
            return {}
        if method == "session/set_config_option":
            self._session(params)
            return {"configOptions": []}
        raise _RpcError(-32601, f"Method not found: {method}")

    def _open_session(self, session_id: str, params: dict[str, Any], turns: list[dict[str, str]]) -> dict[str, Any]:
        meta = params.get("_meta") or {}
        mode = meta.get("sandbox-agent/agentMode") or "build"
        session = {"n": len(turns), "cwd": params.get("cwd"), "mode": mode, "meta": meta, "history": turns}
        session["id"] = session_id
        self._sessions[session_id] = session
        return session

    def _session_result(self, session_id: str) -> dict[str, Any]:
        mode = self._sessions[session_id]["mode"]
        return {
            "sessionId": session_id,
            "modes": {
                "currentModeId": mode,
                "availableModes": [
                    {"id": "build", "name": "Build", "description": "Mock agent for UI testing"},
                    {"id": "plan", "name": "Plan", "description": "Plan-only mock mode"},
                ],
            },
            "configOptions": [
                {
                    "id": "model",
                    "name": "Model",
                    "category": "model",
                    "type": "select",
                    "currentValue": "mock",
                    "options": [{"value": "mock", "name": "Mock"}],
                }
            ],
        }

    def _session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._sessions.get(params.get("sessionId", ""))
        if session is None:
            raise _RpcError(-32602, "unknown session")
        return session

    async def _prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = params.get("sessionId", "")
        session = self._session(params)
        self._cancelled.discard(session_id)
        text = prompt_text(params.get("prompt", []))
        session["n"] += 1
        session["prompt_meta"] = params.get("_meta") or {}
        session["reply"] = []
        ctx = Context(prefix=f"mock_{session['n']}", message=text.strip(), session=session, agent=self)
        memory.remember_prompt(session, ctx.message)
        steps = script_for(ctx)
        try:
            for index, step in enumerate(steps):
                if session_id in self._cancelled:
                    return {"stopReason": "cancelled"}
                if index and self._pace:
                    await asyncio.sleep(self._pace)
                await self.run_step(session_id, step, ctx)
        finally:
            memory.remember_reply(session, ctx.message, "".join(session.pop("reply", [])))
        if session_id in self._cancelled:
            return {"stopReason": "cancelled"}
        session["after"] = ctx
        result: dict[str, Any] = {"stopReason": ctx.stop_reason, **ctx.result_fields}
        if ctx.result_meta:
            result["_meta"] = ctx.result_meta
        return result

    async def _after_prompt(self, session_id: str) -> None:
        """What the script sends once its turn is over (requests left pending for a person)."""
        session = self._sessions.get(session_id)
        ctx = session.pop("after", None) if session is not None else None
        if ctx is not None:
            for step in ctx.after_reply:
                await self.run_step(session_id, step, ctx)

    async def run_step(self, session_id: str, step: Step, ctx: Context) -> None:
        if "update" in step:
            await self.notify("session/update", {"sessionId": session_id, "update": step["update"]})
            reply = ctx.session.get("reply")
            if reply is not None and len(reply) < 64:  # enough of the reply for the replay
                text = memory.reply_text(step["update"])
                if text:
                    reply.append(text)
        elif "request" in step and step.get("detach"):
            # Sent in order, answered whenever the client likes; the script does not wait.
            params = {"sessionId": session_id, **step.get("params", {})}
            await self.send_request(step["request"], params)
        elif "request" in step:
            params = {"sessionId": session_id, **step.get("params", {})}
            result = await self.request(step["request"], params)
            if step.get("save"):
                ctx.saved[step["save"]] = result
        elif "notify" in step:
            await self.notify(step["notify"], step.get("params", {}))
        elif "raw_line" in step:
            await self.write_line(step["raw_line"].encode())
        elif "parallel" in step:
            await asyncio.gather(*(self.run_step(session_id, sub, ctx) for sub in step["parallel"]))
        elif "call" in step:
            for sub in step["call"](ctx):
                await self.run_step(session_id, sub, ctx)
        elif "sleep" in step:
            await asyncio.sleep(step["sleep"])
        elif "exit" in step:
            await self._writer.drain()
            os._exit(step["exit"])


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}


class _BlockingWriter:
    """Stdout that is a regular file (not a pipe): plain blocking writes."""

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


async def _stdio() -> tuple[asyncio.StreamReader, Any]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(os.dup(sys.stdout.fileno()), "wb", 0)
        )
    except ValueError:
        return reader, _BlockingWriter()
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def main(pace_ms: int) -> None:
    reader, writer = await _stdio()
    agent = MockAgent(reader, writer, pace_ms)
    await agent.serve()
    with contextlib.suppress(Exception):
        writer.close()
