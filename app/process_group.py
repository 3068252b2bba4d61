"""The one way this server runs a child process: as the leader of a process group of its own, so
that it and everything it starts are signalled as one, and recorded (``Recorder``: the server's
``acp.orphans.ProcessRegistry``) from its start until the group is killed, so that the next server
on the data dir ends what a crash left. Nothing here waits on the event loop: exits are awaited.

- ``ProcessGroup``: a process its owner talks to for as long as it lives (an agent, a terminal),
  stopped with ``stop``: SIGTERM to the group and a grace (or none), then SIGKILL to whatever of
  the group is left, then the leader reaped and the record ended.
- ``run``: a step that must end by a deadline (an install, a ``git clone``): its output read line
  by line (a bounded tail kept), the whole group killed when the deadline passes (``Overdue`` names
  the step and its limit) or the caller is cancelled, and, once the leader has exited, whatever it
  left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol

log = logging.getLogger("acp_rest_bridge.processes")

# How long a group's leader is waited for after SIGKILL (it cannot ignore it; a process stuck in
# the kernel can still take a while).
KILL_WAIT = 5.0
# After a step's output ends or its leader exits, how long the other is awaited (a child it left
# running may hold the pipe open until it is killed).
DRAIN_GRACE = 1.0
READ_CHUNK = 64 * 1024
# Characters of one output line kept in a step's tail.
LINE_LIMIT = 2000

# What asyncio takes for a child's stdin, stdout and stderr (PIPE, DEVNULL, STDOUT, a file...).
Stream = int | IO[Any] | None
PIPE = asyncio.subprocess.PIPE
DEVNULL = asyncio.subprocess.DEVNULL
STDOUT = asyncio.subprocess.STDOUT


class Recorder(Protocol):
    """Where a run records the process groups it starts and the working directories it makes and
    removes when done (``app.acp.orphans.ProcessRegistry``)."""

    @property
    def env(self) -> dict[str, str]:
        """Added to the environment of every process started: its descendants are found by it."""
        ...

    def started(self, pgid: int) -> None: ...
    def stopped(self, pgid: int) -> None: ...
    def made_dir(self, path: Path) -> None:
        """``path`` is about to be made (blocking until recorded: call it from a worker thread)."""
        ...

    def removed_dir(self, path: Path) -> None:
        """``path`` is gone, or kept for good: no longer for a sweep to remove."""
        ...


def pid_exists(pid: int) -> bool:
    """Whether a process with this id exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessGroup:
    """A child process leading a process group of its own (``start``), recorded until ``stop``."""

    def __init__(self, proc: asyncio.subprocess.Process, recorder: Recorder | None = None) -> None:
        self.proc = proc
        self.pid = proc.pid  # also the group's id
        self._recorder = recorder
        if recorder is not None:
            recorder.started(proc.pid)

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stdin: Stream = DEVNULL,
        stdout: Stream = PIPE,
        stderr: Stream = STDOUT,
        limit: int | None = None,
        recorder: Recorder | None = None,
    ) -> ProcessGroup:
        """Start ``argv`` in a new session and process group, with this process's environment plus
        ``env`` (and the recorder's run marker); ``limit`` is asyncio's per-read buffer limit."""
        full_env = {**os.environ, **(env or {}), **(recorder.env if recorder is not None else {})}
        extra: dict[str, Any] = {} if limit is None else {"limit": limit}
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=full_env,
            cwd=cwd,
            start_new_session=True,  # its own group: the whole tree can be signalled
            **extra,
        )
        return cls(proc, recorder)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def recorded(self) -> bool:
        """Whether the group is still recorded as running (``stop`` ends that once it is reaped)."""
        return self._recorder is not None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole group. Once the leader is reaped, its number is free for reuse
        when the group's last member is gone: then only while no process has taken that pid
        (a reused pid leads a group of another's)."""
        if self.proc.returncode is not None and pid_exists(self.pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole group, at once (also the synchronous last resort at shutdown)."""
        self.signal(signal.SIGKILL)

    async def wait(self) -> int:
        """The leader's exit, once its pipes are closed too (by the rest of the group as well)."""
        return await self.proc.wait()

    async def exited(self) -> None:
        """The leader's exit, whether or not others of the group still hold its pipes open (Linux's
        pidfd, readable once the process has ended; without one, as ``wait``)."""
        if self.proc.returncode is not None:
            return
        try:
            fd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            return  # ended and reaped already
        except OSError:
            await self.proc.wait()
            return
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await ended
        finally:
            loop.remove_reader(fd)
            os.close(fd)

    async def stop(self, grace: float = 0.0, kill_wait: float = KILL_WAIT) -> bool:
        """SIGTERM to the group and up to ``grace`` seconds for the leader to exit (with no grace,
        straight on), then SIGKILL to whatever of the group is left, also when the caller is
        cancelled meanwhile; then up to ``kill_wait`` seconds for the leader to be reaped, when its
        record ends (later, if the wait gives up first). True when it was reaped in time."""
        try:
            if grace > 0 and self.proc.returncode is None:
                self.signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.proc.wait(), grace)
        finally:
            self.kill()  # children of the leader may outlive it in the group
        waiter = asyncio.ensure_future(self.proc.wait())
        waiter.add_done_callback(self._reaped)  # recorded even when this wait is cut short
        try:
            await asyncio.wait_for(asyncio.shield(waiter), kill_wait)
        except TimeoutError:
            log.warning("process group %d: its leader is still there %gs after SIGKILL", self.pid, kill_wait)
            return False
        return True

    def _reaped(self, waiter: asyncio.Future[int]) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.stopped(self.pid)

    async def __aenter__(self) -> ProcessGroup:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.stop()


@dataclass(frozen=True, slots=True)
class Finished:
    """A step that ran to its end: its exit code and the last lines of its output (stdout and
    stderr together; blank lines left out, each line cut at ``LINE_LIMIT`` characters)."""

    returncode: int
    lines: list[str]

    def tail(self, chars: int = 4000) -> str:
        return "\n".join(self.lines)[-chars:]


class Overdue(TimeoutError):
    """A step did not finish by its deadline; its whole group was killed."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what} did not finish in {timeout:g}s")
        self.what = what
        self.timeout = timeout


async def run(
    argv: Sequence[str],
    *,
    timeout: float | None,
    what: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    recorder: Recorder | None = None,
    stderr: bool = True,
    on_line: Callable[[str], None] | None = None,
    keep_lines: int = 200,
    running: set[ProcessGroup] | None = None,
) -> Finished:
    """Run ``argv`` to its end in a group of its own, for at most ``timeout`` seconds (None or 0:
    no limit), stdin from /dev/null. Its output (stderr too, unless ``stderr`` is False) is read as
    it comes: each line to ``on_line``, the last ``keep_lines`` kept. Raises ``Overdue`` (naming
    ``what``, by default the program) when the deadline passes; whatever the outcome, nothing of
    the group is left running when this returns or raises. The group is in ``running`` meanwhile
    (for an owner that must kill every step at once)."""
    group = await ProcessGroup.start(
        argv, env=env, cwd=cwd, stdout=PIPE, stderr=STDOUT if stderr else DEVNULL, recorder=recorder
    )
    if running is not None:
        running.add(group)
    lines: deque[str] = deque(maxlen=keep_lines)

    def line(text: str) -> None:
        if text.strip():
            lines.append(text[:LINE_LIMIT])
        if on_line is not None:
            on_line(text)

    assert group.proc.stdout is not None
    reader = asyncio.create_task(_read_lines(group.proc.stdout, line), name=f"output-{group.pid}")
    exited = asyncio.create_task(group.exited(), name=f"exit-{group.pid}")
    try:
        async with asyncio.timeout(timeout or None):
            await asyncio.wait((reader, exited), return_when=asyncio.FIRST_COMPLETED)
            if reader.done():  # the output's end (its last writer gone): the leader's exit follows
                await exited
            else:  # the leader exited, and what it left running holds the pipe: a moment to finish
                await asyncio.wait((reader,), timeout=DRAIN_GRACE)
    except TimeoutError:
        raise Overdue(what or os.path.basename(argv[0]), timeout or 0) from None
    finally:
        try:
            await group.stop()  # what is left of it (all of it: the deadline passed, or a cancel)
            if not reader.done():  # its last writers are gone now: the rest is read, within a bound
                await asyncio.wait((reader,), timeout=DRAIN_GRACE)
        finally:
            reader.cancel()
            exited.cancel()
            if running is not None:
                running.discard(group)
    if reader.done() and not reader.cancelled():
        reader.result()  # (an error reading the output is the step's)
    returncode = group.returncode
    if returncode is None:  # (not reaped within stop's bound: it was killed)
        returncode = -signal.SIGKILL
    return Finished(returncode, list(lines))


async def _read_lines(stream: asyncio.StreamReader, line: Callable[[str], None]) -> None:
    pending = b""
    while chunk := await stream.read(READ_CHUNK):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            line(raw.decode("utf-8", "replace").rstrip())
        if len(pending) > READ_CHUNK:  # an endless line: taken in pieces
            line(pending.decode("utf-8", "replace"))
            pending = b""
    if pending:
        line(pending.decode("utf-8", "replace").rstrip())
