"""The process groups this server started (agents, terminals, install steps, skill clones), kept on
disk so that the next server on the same data dir can end those a crash left behind.

Every child process runs in its own process group (``app.process_group``, which records it here:
this registry is its ``Recorder``). When one starts, a line ``+ <pgid>
<start time>`` is appended to ``<data dir>/processes/<run id>``; when it is stopped, ``- <pgid>``.
The start time is the process's ``/proc/<pid>/stat`` field 22 (clock ticks since boot), which
together with the boot id identifies the process: a pid reused by another process has another
start time. Every process started also carries ``ACP_BRIDGE_RUN=<run id>`` in its environment, so
its descendants can be recognised even when they left the group.

Directories a run works in and removes when done (an install's or a clone's staging folder) are
recorded too: ``d <JSON path>`` before the directory is made, ``-d <JSON path>`` once it is gone.

At start-up (``sweep``), for each file of an earlier run: a group whose leader is still the same
process is killed as a whole; processes that still carry that run's marker are killed too (the
leader may be gone while its children live on, reparented to init); then the directories it left
are removed, and the file. Appends go through one writer thread: the event loop never touches the
disk.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

log = logging.getLogger("acp_rest_bridge.processes")

RUN_ENV = "ACP_BRIDGE_RUN"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat from field 3 (state) on; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': split after the last.
    return stat[stat.rfind(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks after boot); None if no such process."""
    fields = _stat_fields(pid)
    try:
        return None if fields is None else int(fields[19])
    except (IndexError, ValueError):
        return None


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read().split(b"\0")
    except OSError:
        return False


@dataclass(slots=True)
class SweepResult:
    groups: int = 0  # process groups killed (their leader was still the recorded process)
    processes: int = 0  # other processes of an earlier run killed
    directories: int = 0  # working directories of an earlier run removed


class ProcessRegistry:
    """This run's record of its process groups; ``sweep`` ends those of earlier runs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.run_id = uuid.uuid4().hex
        self.path = directory / self.run_id
        self._queue: queue.SimpleQueue[tuple[str, int] | tuple[str, str, threading.Event] | None]
        self._queue = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._live: set[int] = set()  # the writer thread's view of the groups not stopped yet
        self._dirs: set[str] = set()  # ... and of the directories not removed yet

    @property
    def env(self) -> dict[str, str]:
        """Added to the environment of every process this run starts."""
        return {RUN_ENV: self.run_id}

    # ---- this run ----------------------------------------------------------------------------
    def open(self) -> None:
        """Create the directory and start the writer; call after ``sweep``."""
        if self._writer is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._writer = threading.Thread(target=self._write_loop, name="process-registry", daemon=True)
        self._writer.start()

    def started(self, pgid: int) -> None:
        """A process group leader was started (never blocks)."""
        if self._writer is not None:
            self._queue.put(("+", pgid))

    def stopped(self, pgid: int) -> None:
        """The group was stopped and reaped (never blocks)."""
        if self._writer is not None:
            self._queue.put(("-", pgid))

    def made_dir(self, path: Path, timeout: float = 5.0) -> None:
        """``path`` is about to be made, and removed by this run when done: recorded before this
        returns, so that a crash in between leaves nothing the next sweep does not find. Blocking
        (at most ``timeout``): call it from a worker thread."""
        self._dir_line("d", path, timeout)

    def removed_dir(self, path: Path) -> None:
        """The directory recorded by ``made_dir`` is gone (never blocks)."""
        self._dir_line("-d", path, 0)

    def _dir_line(self, op: str, path: Path, timeout: float) -> None:
        if self._writer is None:
            return
        written = threading.Event()
        self._queue.put((op, str(path), written))
        if timeout:
            written.wait(timeout)

    def close(self) -> None:
        """Stop the writer. This run's file goes when every group it lists was stopped."""
        if self._writer is None:
            return
        self._queue.put(None)
        self._writer.join(5)
        self._writer = None
        if not self._live and not self._dirs:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _write_loop(self) -> None:
        boot = _boot_id()
        try:
            fh = open(self.path, "a", encoding="ascii")  # kept open for the run
        except OSError as exc:
            log.error("cannot record agent processes in %s: %s", self.path, exc)
            fh = None
        if fh is not None:
            fh.write(f"boot {boot}\n")
            fh.flush()
        while (entry := self._queue.get()) is not None:
            if fh is None:
                if len(entry) == 3:
                    entry[2].set()
                continue
            if len(entry) == 3:
                self._write_dir(fh, *entry)
                continue
            op, pgid = entry
            if op == "+":
                started = start_time(pgid)
                if started is None:
                    continue  # already gone
                line = f"+ {pgid} {started}\n"
                self._live.add(pgid)
            elif pgid in self._live:
                line = f"- {pgid}\n"
                self._live.discard(pgid)
            else:
                continue  # its start was not written (gone before): nothing to end
            try:
                fh.write(line)
                fh.flush()  # to the kernel: a crash of this process loses nothing written
            except OSError as exc:
                log.error("cannot record agent process %d in %s: %s", pgid, self.path, exc)
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()

    def _write_dir(self, fh: TextIO, op: str, path: str, written: threading.Event) -> None:
        (self._dirs.add if op == "d" else self._dirs.discard)(path)
        try:
            fh.write(f"{op} {json.dumps(path)}\n")
            fh.flush()
        except OSError as exc:
            log.error("cannot record directory %s in %s: %s", path, self.path, exc)
        written.set()

    # ---- earlier runs ------------------------------------------------------------------------
    def sweep(self) -> SweepResult:
        """End what earlier runs on this data dir left alive. Blocking: run it in a thread."""
        result = SweepResult()
        if not self.directory.is_dir():
            return result
        boot = _boot_id()
        for path in sorted(self.directory.iterdir()):
            if path == self.path or not path.is_file():
                continue
            try:
                lines = path.read_text(encoding="ascii", errors="replace").splitlines()
            except OSError as exc:
                log.error("cannot read %s: %s", path, exc)
                continue
            self._sweep_run(path.name, lines, boot, result)
            with contextlib.suppress(OSError):
                path.unlink()
        if result.groups or result.processes or result.directories:
            log.warning(
                "ended %d agent/terminal/install process groups and %d other processes, and removed %d working"
                " directories left by an earlier run",
                result.groups,
                result.processes,
                result.directories,
            )
        return result

    def _sweep_run(self, run_id: str, lines: list[str], boot: str, result: SweepResult) -> None:
        groups: dict[int, int] = {}
        dirs: set[str] = set()
        same_boot = True
        for line in lines:
            op, _, rest = line.partition(" ")
            if op in ("d", "-d"):
                with contextlib.suppress(ValueError):
                    path = json.loads(rest)
                    if isinstance(path, str) and os.path.isabs(path):
                        (dirs.add if op == "d" else dirs.discard)(path)
                continue
            parts = line.split()
            if len(parts) == 2 and parts[0] == "boot":
                same_boot = parts[1] == boot
            elif len(parts) == 3 and parts[0] == "+" and parts[1].isdigit() and parts[2].isdigit():
                groups[int(parts[1])] = int(parts[2])
            elif len(parts) == 2 and parts[0] == "-" and parts[1].isdigit():
                groups.pop(int(parts[1]), None)
        if same_boot:  # else the machine restarted since: nothing of that run can be alive
            self._end_groups(run_id, groups, result)
        # Made by that run (a mkdir that would have failed on anything already there), after its
        # processes, which may still have been writing in them.
        for path in dirs:
            if os.path.lexists(path):
                shutil.rmtree(path, ignore_errors=True)
                result.directories += 1

    def _end_groups(self, run_id: str, groups: dict[int, int], result: SweepResult) -> None:
        for pgid, started in groups.items():
            # The leader is the recorded process only if its start time matches: a reused pid has
            # another one, and its group is left alone.
            if start_time(pgid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    result.groups += 1
        result.processes += _kill_marked(f"{RUN_ENV}={run_id}".encode(), exclude=os.getpid())


def _kill_marked(marker: bytes, exclude: int) -> int:
    """SIGKILL every process whose environment holds ``marker`` (descendants of an earlier run)."""
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == exclude:
            continue
        fields = _stat_fields(pid)
        if fields is None or fields[0] == b"Z":
            continue
        if _carries(pid, marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed
