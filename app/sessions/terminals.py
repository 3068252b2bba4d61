"""ACP client services ``terminal/*``: commands the agent runs through the bridge.

Each terminal is a real process in its own process group (so the whole tree can be killed), started
in the session's working directory unless the agent names one. stdout and stderr are read
continuously into one buffer that keeps the last ``outputByteLimit`` bytes, cut at a UTF-8
character boundary. Terminals still open when the session ends are killed (``Session`` ends them). The
output of a terminal stays readable in memory after release, for tool results that show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.acp.requests import CreateTerminalRequest
from app.acp.sdk import RequestError
from app.fs.paths import os_message
from app.process_group import DEVNULL, PIPE, STDOUT, ProcessGroup, Recorder

from .host import SessionHost

# Output kept when the agent sets no outputByteLimit (bounds memory for chatty commands).
DEFAULT_OUTPUT_LIMIT = 1024 * 1024
# After the command exits, how long output still in the pipe is awaited (a background child may
# hold the pipe open indefinitely).
DRAIN_GRACE = 1.0
# How long kill/release/session end wait for a killed process group to be gone.
KILL_WAIT = 5.0
# Released terminals whose output is still kept per session, oldest dropped first.
RELEASED_KEPT = 64
READ_CHUNK = 64 * 1024


def utf8_cut(data: bytes | bytearray, start: int) -> int:
    """The first index >= ``start`` that begins a UTF-8 character (skips continuation bytes)."""
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return start


def incomplete_tail(data: bytes) -> int:
    """How many bytes at the end are an unfinished UTF-8 character (more may still arrive)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # continuation byte: keep looking for the lead byte
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return back if back < need else 0
    return 0


def exit_status(returncode: int) -> dict[str, Any]:
    if returncode >= 0:
        return {"exitCode": returncode, "signal": None}
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    return {"exitCode": None, "signal": name}


class Terminal:
    def __init__(self, terminal_id: str, group: ProcessGroup, output_limit: int) -> None:
        self.id = terminal_id
        self.group = group
        self.proc = group.proc
        self.pid = group.pid
        self.output_limit = output_limit
        self.truncated = False
        self.exit_status: dict[str, Any] | None = None
        self.exited = asyncio.Event()
        self._buffer = bytearray()
        self._reader = asyncio.create_task(self._read(), name=f"terminal-read-{terminal_id}")
        self._watcher = asyncio.create_task(self._watch(), name=f"terminal-wait-{terminal_id}")

    @classmethod
    async def start(
        cls,
        terminal_id: str,
        command: str,
        args: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str,
        output_limit: int,
        processes: Recorder | None = None,
    ) -> Terminal:
        # Without args the command is a shell line (agents send e.g. "npm test -- --watch=false").
        argv = [command, *args] if args else ["/bin/sh", "-c", command]
        group = await ProcessGroup.start(
            argv, env=env, cwd=cwd, stdin=DEVNULL, stdout=PIPE, stderr=STDOUT, recorder=processes
        )
        return cls(terminal_id, group, output_limit)

    # ---- output ------------------------------------------------------------------------------
    async def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while chunk := await stream.read(READ_CHUNK):
            self._append(chunk)

    def _append(self, data: bytes) -> None:
        self._buffer += data
        excess = len(self._buffer) - self.output_limit
        if excess > 0:
            del self._buffer[: utf8_cut(self._buffer, excess)]
            self.truncated = True

    def output(self) -> str:
        data = bytes(self._buffer)
        if not self.exited.is_set():
            data = data[: len(data) - incomplete_tail(data)]
        return data.decode("utf-8", "replace")

    def snapshot(self) -> dict[str, Any]:
        """The ``terminal/output`` result."""
        result: dict[str, Any] = {"output": self.output(), "truncated": self.truncated}
        if self.exit_status is not None:
            result["exitStatus"] = self.exit_status
        return result

    # ---- life --------------------------------------------------------------------------------
    async def _watch(self) -> None:
        returncode = await self.proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader), DRAIN_GRACE)
        self.exit_status = exit_status(returncode)
        self.exited.set()

    @property
    def running(self) -> bool:
        return self.proc.returncode is None or not self._reader.done()

    def kill(self) -> None:
        """SIGKILL the terminal's process group (the command and what it started)."""
        self.group.kill()

    async def wait(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self.exited.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        """Kill the group (also what the command left running after it exited), wait for the
        exit, stop reading."""
        await self.group.stop(kill_wait=KILL_WAIT)
        await self.wait(KILL_WAIT)
        for task in (self._reader, self._watcher):
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


@dataclass(slots=True)
class ReleasedOutput:
    output: str
    truncated: bool
    exit_status: dict[str, Any] | None


class SessionTerminals:
    """The terminals of one session."""

    def __init__(self) -> None:
        self.active: dict[str, Terminal] = {}
        self.released: OrderedDict[str, ReleasedOutput] = OrderedDict()
        self.closed = False
        self._count = 0

    def next_id(self) -> str:
        self._count += 1
        return f"term_{self._count}"

    def get(self, terminal_id: Any) -> Terminal:
        terminal = self.active.get(terminal_id) if isinstance(terminal_id, str) else None
        if terminal is None:
            raise RequestError(-32602, f"Invalid params: unknown terminal: {terminal_id}", {"terminalId": terminal_id})
        return terminal

    def keep_output(self, terminal: Terminal) -> None:
        self.released[terminal.id] = ReleasedOutput(terminal.output(), terminal.truncated, terminal.exit_status)
        while len(self.released) > RELEASED_KEPT:
            self.released.popitem(last=False)

    async def release(self, terminal: Terminal) -> None:
        self.active.pop(terminal.id, None)
        await terminal.close()
        self.keep_output(terminal)

    async def close_all(self) -> None:
        self.closed = True
        terminals = list(self.active.values())
        await asyncio.gather(*(self.release(t) for t in terminals), return_exceptions=True)

    def output_of(self, terminal_id: str) -> str | None:
        """A terminal's output so far (also after release); None if the session has no such terminal.
        Pure in-memory lookup, safe to call from translation (tool results that show a terminal)."""
        active = self.active.get(terminal_id)
        if active is not None:
            return active.output()
        released = self.released.get(terminal_id)
        return released.output if released is not None else None


class TerminalHost(SessionHost, Protocol):
    """A session with terminals."""

    @property
    def terminals(self) -> SessionTerminals: ...


# ---- services ----------------------------------------------------------------------------------
async def create(session: TerminalHost, params: Any, request_id: Any) -> dict[str, Any]:
    request = CreateTerminalRequest.model_validate(params)
    terminals = session.terminals
    if terminals.closed or session.ended:
        raise RequestError(-32603, "Internal error: the session has ended", None)
    cwd = session.cwd
    if request.cwd:
        cwd = os.path.join(session.cwd, request.cwd)  # ACP wants absolute; a relative one is taken from cwd
    limit = request.output_byte_limit if request.output_byte_limit is not None else DEFAULT_OUTPUT_LIMIT
    env = {variable.name: variable.value for variable in request.env or []}
    terminal_id = terminals.next_id()
    try:
        terminal = await Terminal.start(
            terminal_id,
            request.command,
            request.args or [],
            env=env,
            cwd=cwd,
            output_limit=limit,
            processes=session.processes,
        )
    except OSError as exc:
        raise RequestError(
            -32603, f"Internal error: cannot start {request.command!r}: {os_message(exc)}", {"cwd": cwd}
        ) from exc
    if terminals.closed:  # the session ended while the process was starting
        await terminal.close()
        raise RequestError(-32603, "Internal error: the session has ended", None)
    terminals.active[terminal_id] = terminal
    return {"terminalId": terminal_id}


async def output(session: TerminalHost, params: Any, request_id: Any) -> dict[str, Any]:
    return session.terminals.get(_terminal_id(params)).snapshot()


async def wait_for_exit(session: TerminalHost, params: Any, request_id: Any) -> dict[str, Any]:
    terminal = session.terminals.get(_terminal_id(params))
    await terminal.exited.wait()
    assert terminal.exit_status is not None
    return dict(terminal.exit_status)


async def kill(session: TerminalHost, params: Any, request_id: Any) -> dict[str, Any]:
    terminal = session.terminals.get(_terminal_id(params))
    terminal.kill()
    await terminal.wait(KILL_WAIT)
    return {}


async def release(session: TerminalHost, params: Any, request_id: Any) -> dict[str, Any]:
    terminals = session.terminals
    await terminals.release(terminals.get(_terminal_id(params)))
    return {}


def _terminal_id(params: Any) -> Any:
    if not isinstance(params, dict) or not isinstance(params.get("terminalId"), str):
        raise RequestError(-32602, "Invalid params: terminalId is required", None)
    return params["terminalId"]
