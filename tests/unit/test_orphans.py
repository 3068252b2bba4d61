"""The process registry: groups of an earlier run are ended at start-up, and only they."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.acp.orphans import RUN_ENV, ProcessRegistry, _boot_id, start_time
from tests.support import pid_alive, wait_until

CHILD = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)


def _group(procs: list[subprocess.Popen[bytes]], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A process in its own group, with a child in that group."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD], start_new_session=True, env={**os.environ, **(env or {})})
    procs.append(proc)
    assert wait_until(lambda: len(_members(proc.pid)) == 2, 10)
    return proc


def _members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid and pid_alive(int(entry)):
                    out.append(int(entry))
            except OSError:
                pass
    return out


def test_a_recorded_group_is_ended_and_a_reused_pid_is_not(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    ours = _group(spawned)
    reused = _group(spawned)  # stands for a pid reused since: its start time differs from the record
    started = start_time(ours.pid)
    assert started is not None
    lines = [f"boot {_boot_id()}", f"+ {ours.pid} {started}", f"+ {reused.pid} {started - 1}"]
    (tmp_path / "oldrun").write_text("\n".join(lines) + "\n")
    result = ProcessRegistry(tmp_path).sweep()
    assert result.groups == 1
    assert wait_until(lambda: not _members(ours.pid), 5)
    assert len(_members(reused.pid)) == 2
    assert not (tmp_path / "oldrun").exists()


def test_stopped_groups_and_other_boots_are_left_alone(tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    first = _group(spawned)
    second = _group(spawned)
    (tmp_path / "stopped").write_text(f"boot {_boot_id()}\n+ {first.pid} {start_time(first.pid)}\n- {first.pid}\n")
    (tmp_path / "oldboot").write_text(f"boot not-this-one\n+ {second.pid} {start_time(second.pid)}\n")
    assert ProcessRegistry(tmp_path).sweep().groups == 0
    assert len(_members(first.pid)) == 2 and len(_members(second.pid)) == 2


def test_processes_that_left_the_group_are_found_by_their_run_marker(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    marked = _group(spawned, {RUN_ENV: "oldrun"})
    other = _group(spawned, {RUN_ENV: "another"})
    (tmp_path / "oldrun").write_text(f"boot {_boot_id()}\n")
    result = ProcessRegistry(tmp_path).sweep()
    assert result.processes == 2  # the leader and its child
    assert wait_until(lambda: not _members(marked.pid), 5)
    assert len(_members(other.pid)) == 2


def test_this_run_records_starts_and_stops(tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    registry = ProcessRegistry(tmp_path / "processes")
    registry.open()
    proc = _group(spawned)
    registry.started(proc.pid)
    assert wait_until(lambda: f"+ {proc.pid} " in registry.path.read_text(), 5)
    registry.stopped(proc.pid)
    registry.close()
    assert not registry.path.exists()  # everything it started was stopped
    kept = ProcessRegistry(tmp_path / "processes")
    kept.open()
    kept.started(proc.pid)
    kept.close()
    assert f"+ {proc.pid} {start_time(proc.pid)}" in kept.path.read_text()
    assert ProcessRegistry(tmp_path / "processes").sweep().groups == 1


def test_a_group_gone_before_its_start_was_written_leaves_no_line(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """A step that ends (and is reaped) before the writer thread records its start leaves neither
    line: its stop alone would be a group the file never had."""
    proc = _group(spawned)
    proc.kill()
    proc.wait()
    registry = ProcessRegistry(tmp_path / "processes")
    registry.open()
    registry.started(proc.pid)  # already gone when the writer looks
    registry.stopped(proc.pid)
    mark = tmp_path / "mark"
    registry.made_dir(mark)  # returns once written: the lines before it are too
    lines = registry.path.read_text().splitlines()
    registry.removed_dir(mark)
    registry.close()
    assert not [line for line in lines if line.startswith(("+ ", "- "))], lines


def test_a_stale_private_data_dir_has_its_leftovers_ended(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    from app import datadir

    gone = subprocess.Popen(["true"])
    gone.wait(5)  # the pid of a server that is no longer there
    stale = tmp_path / f"acp-rest-bridge-{gone.pid}-0a1b2c"
    (stale / "processes").mkdir(parents=True)
    left = _group(spawned)
    (stale / "processes" / "oldrun").write_text(f"boot {_boot_id()}\n+ {left.pid} {start_time(left.pid)}\n")
    datadir.remove_stale(tmp_path)
    assert not stale.exists()
    assert wait_until(lambda: not _members(left.pid), 5)


def test_working_directories_are_recorded_before_they_exist_and_removed_by_the_sweep(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "processes")
    registry.open()
    done, left = tmp_path / "done space", tmp_path / "left"
    for folder in (done, left):
        registry.made_dir(folder)  # returns once written
        assert f'd "{folder}"' in registry.path.read_text()
        folder.mkdir()
        (folder / "f").write_text("partial")
    shutil.rmtree(done)
    registry.removed_dir(done)
    registry.close()
    assert registry.path.exists()  # `left` is still there
    (tmp_path / "done space").mkdir()  # made again since, by someone else: not that run's
    result = ProcessRegistry(tmp_path / "processes").sweep()
    assert result.directories == 1
    assert not left.exists()
    assert done.exists()


def test_a_stale_private_data_dir_has_its_temporary_files_removed(tmp_path: Path) -> None:
    from app import datadir
    from app.fs.temps import TempBook, temp_name

    gone = subprocess.Popen(["true"])
    gone.wait(5)
    stale = tmp_path / f"acp-rest-bridge-{gone.pid}-0a1b2c"
    stale.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    book = TempBook(str(stale / "temps"))
    fd = os.open(work, os.O_PATH | os.O_DIRECTORY)
    try:
        name = temp_name("f.txt")
        book.add(fd, name)
        (work / name).write_text("partial")
    finally:
        os.close(fd)
    (work / "f.txt").write_text("the user's")
    datadir.remove_stale(tmp_path)
    assert not stale.exists()
    assert os.listdir(work) == ["f.txt"]
