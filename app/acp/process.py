"""An ACP agent as a child process: its own process group, full environment, stderr always drained."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.process_group import PIPE, ProcessGroup, Recorder

# asyncio's per-read limit; the SDK reassembles longer lines, a large limit means fewer loops.
STDOUT_LIMIT = 8 * 1024 * 1024
# Longest stdout line kept (bytes); a longer one is reported cut, never buffered whole.
STDOUT_LINE_LIMIT = 64 * 1024 * 1024

log = logging.getLogger("acp_rest_bridge.agent")


class StderrBuffer:
    """Bounded capture of an agent's stderr: the first 20 lines, the last 50, and a count."""

    HEAD = 20
    TAIL = 50

    def __init__(self, line_limit: int = 4096) -> None:
        self._line_limit = line_limit
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=self.TAIL)
        self.total_lines = 0

    def add(self, line: str) -> None:
        if len(line) > self._line_limit:
            line = line[: self._line_limit] + "…"
        self.total_lines += 1
        if len(self.head) < self.HEAD:
            self.head.append(line)
        self.tail.append(line)

    @property
    def truncated(self) -> bool:
        return self.total_lines > self.HEAD

    def output(self) -> dict[str, Any]:
        """Legacy StderrOutput: head is everything when not truncated; tail only when truncated."""
        out: dict[str, Any] = {"head": "\n".join(self.head)}
        if self.truncated:
            out["tail"] = "\n".join(self.tail)
        out["truncated"] = self.truncated
        out["total_lines"] = self.total_lines
        return out

    def text(self) -> str:
        if not self.truncated:
            return "\n".join(self.head)
        return "\n".join([*self.head, "…", *self.tail])


@dataclass(slots=True)
class ExitInfo:
    code: int | None
    signal: int | None

    @property
    def description(self) -> str:
        if self.signal is not None:
            return f"agent process killed by signal {self.signal}"
        return f"agent process exited with code {self.code}"


class AgentProcess:
    """An agent's process group (``app.process_group``), its stdio, and its stderr drained."""

    def __init__(
        self,
        group: ProcessGroup,
        stderr: StderrBuffer,
        stdout_line_limit: int = STDOUT_LINE_LIMIT,
    ) -> None:
        self.group = group
        self.proc = group.proc
        self.pid = group.pid
        self.stderr = stderr
        self.stdout_line_limit = stdout_line_limit
        self._exit_logged = False
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"agent-stderr-{group.pid}")

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        stderr_line_limit: int = 4096,
        stdout_line_limit: int = STDOUT_LINE_LIMIT,
        processes: Recorder | None = None,
    ) -> AgentProcess:
        """Start ``argv``; with ``processes``, its group is recorded so a later run can end it."""
        group = await ProcessGroup.start(
            argv, env=env, cwd=cwd, stdin=PIPE, stdout=PIPE, stderr=PIPE, limit=STDOUT_LIMIT, recorder=processes
        )
        log.info("agent started: pid %d, %s (cwd %s)", group.pid, " ".join(argv), cwd)
        return cls(group, StderrBuffer(stderr_line_limit), stdout_line_limit)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self.proc.stdin is not None
        return self.proc.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.proc.stdout is not None
        return self.proc.stdout

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def exit_info(self) -> ExitInfo:
        code = self.proc.returncode
        if code is not None and code < 0:
            return ExitInfo(None, -code)
        return ExitInfo(code, None)

    async def _drain_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        pending = b""
        while True:
            try:
                chunk = await stream.read(65536)
            except (ConnectionError, OSError):
                break
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.stderr.add(line.decode("utf-8", "replace").rstrip("\r"))
            if len(pending) > 65536:  # an endless line: keep its start, count it once
                self.stderr.add(pending.decode("utf-8", "replace"))
                pending = b""
        if pending:
            self.stderr.add(pending.decode("utf-8", "replace").rstrip("\r"))

    async def wait(self) -> int:
        code = await self.proc.wait()
        if not self._exit_logged:
            self._exit_logged = True
            log.info("agent pid %d ended: %s", self.pid, self.exit_info().description)
        # stderr may still hold the last lines when the process is already gone.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        return code

    async def stop(self, grace: float) -> None:
        """Close stdin, SIGTERM the group, SIGKILL it after ``grace`` seconds; reaps (within a bound)."""
        with contextlib.suppress(Exception):
            self.stdin.close()
        if self.proc.returncode is None:
            log.info("stopping agent pid %d: SIGTERM to its group, SIGKILL after %gs", self.pid, grace)
        # Children of the agent may outlive it in the group: whatever is left is killed too.
        if await self.group.stop(grace):
            await self.wait()  # logs the exit, takes stderr's last lines

    def kill_now(self) -> None:
        """Synchronous last resort (interpreter shutdown)."""
        self.group.kill()
