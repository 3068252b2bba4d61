"""The process-group runner (app/process_group.py): a deadline or a cancel kills the whole group,
grandchildren included; what a step leaves running when it exits goes too; every group is recorded
in the process registry from its start until it is gone."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.acp.orphans import RUN_ENV, ProcessRegistry
from app.process_group import Overdue, ProcessGroup, run
from tests.support import pid_alive, wait_until_async

# A leader (sh), its child (a subshell) and that child's child (sleep), each pid written down.
TREE = """
echo $$ > "$LEADER"
( sleep 300 & echo $! >> "$PIDS"; wait ) &
echo $! >> "$PIDS"
echo $$ >> "$PIDS"
echo started
wait
"""


def pids(path: Path) -> list[int]:
    try:
        return [int(line) for line in path.read_text().split()]
    except FileNotFoundError:
        return []


async def all_gone(path: Path) -> bool:
    return await wait_until_async(lambda: not any(pid_alive(p) for p in pids(path)), 10)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[ProcessRegistry]:
    processes = ProcessRegistry(tmp_path / "processes")
    processes.open()
    yield processes
    processes.close()


def tree_env(tmp_path: Path) -> dict[str, str]:
    return {"PIDS": str(tmp_path / "pids"), "LEADER": str(tmp_path / "leader")}


def records(registry: ProcessRegistry) -> list[str]:
    return registry.path.read_text().splitlines()[1:] if registry.path.exists() else []


async def test_a_deadline_kills_the_whole_group_grandchildren_included(
    tmp_path: Path, registry: ProcessRegistry
) -> None:
    pid_file = tmp_path / "pids"
    lines: list[str] = []
    with pytest.raises(Overdue) as caught:
        await asyncio.wait_for(
            run(
                ["/bin/sh", "-c", TREE],
                timeout=1.0,
                what="the tree",
                env=tree_env(tmp_path),
                recorder=registry,
                on_line=lines.append,
            ),
            60,  # far below the 300 s the tree would run
        )
    assert str(caught.value) == "the tree did not finish in 1s"
    assert isinstance(caught.value, TimeoutError)
    assert lines == ["started"]
    assert len(pids(pid_file)) >= 3  # leader, child, grandchild
    assert await all_gone(pid_file)
    leader = pids(tmp_path / "leader")[0]
    # Recorded from its start, and the record ended once it was killed.
    assert await wait_until_async(lambda: f"- {leader}" in records(registry), 5), records(registry)
    assert records(registry)[0].startswith(f"+ {leader} ")


async def test_a_cancel_kills_the_whole_group(tmp_path: Path, registry: ProcessRegistry) -> None:
    pid_file = tmp_path / "pids"
    running: set[ProcessGroup] = set()
    step = asyncio.create_task(
        run(
            ["/bin/sh", "-c", TREE],
            timeout=None,
            env=tree_env(tmp_path),
            recorder=registry,
            running=running,
        )
    )
    assert await wait_until_async(lambda: len(pids(pid_file)) >= 3, 10)
    assert all(pid_alive(p) for p in pids(pid_file))
    assert len(running) == 1
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    assert await all_gone(pid_file)
    assert not running
    leader = pids(tmp_path / "leader")[0]
    assert await wait_until_async(lambda: f"- {leader}" in records(registry), 5), records(registry)


async def test_what_a_step_leaves_running_is_killed_and_its_output_kept(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = 'sleep 300 > /dev/null 2>&1 & echo $! >> "$PIDS"; echo one; echo; printf "two\\nthree"; exit 3'
    seen: list[str] = []
    done = await asyncio.wait_for(
        run(["/bin/sh", "-c", script], timeout=60, env={"PIDS": str(pid_file)}, on_line=seen.append, keep_lines=2),
        30,
    )
    assert done.returncode == 3
    assert seen == ["one", "", "two", "three"]
    assert done.lines == ["two", "three"]  # the last two, blank ones left out
    assert done.tail() == "two\nthree"
    assert await all_gone(pid_file)  # the background sleep, left in the group: killed


async def test_a_missing_program_is_an_os_error_and_records_nothing(tmp_path: Path, registry: ProcessRegistry) -> None:
    with pytest.raises(FileNotFoundError):
        await run([str(tmp_path / "no-such-program")], timeout=5, recorder=registry)
    registry.close()
    assert not registry.path.exists()  # nothing started, nothing left to sweep


async def test_the_run_marker_reaches_the_group(tmp_path: Path, registry: ProcessRegistry) -> None:
    done = await run(["/bin/sh", "-c", f'echo "${RUN_ENV}"'], timeout=30, recorder=registry)
    assert done.lines == [registry.run_id]
    registry.close()
    assert not registry.path.exists()  # started and stopped: nothing for a sweep


async def test_stop_sends_sigterm_then_sigkill_after_the_grace(tmp_path: Path, registry: ProcessRegistry) -> None:
    # One leader leaves on SIGTERM; the other ignores it and is killed when the grace is over.
    polite = await ProcessGroup.start(["/bin/sh", "-c", "echo ready; exec sleep 300"], recorder=registry)
    stubborn = await ProcessGroup.start(
        ["/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"], recorder=registry
    )
    for group in (polite, stubborn):
        assert group.proc.stdout is not None
        assert await group.proc.stdout.readline() == b"ready\n"
        assert group.recorded
    assert await polite.stop(grace=30)
    assert polite.returncode == -signal.SIGTERM
    assert await stubborn.stop(grace=0.2)
    assert stubborn.returncode == -signal.SIGKILL
    assert not polite.recorded and not stubborn.recorded
    registry.close()
    assert not registry.path.exists()


async def test_a_group_whose_leader_is_gone_is_still_killed_and_then_left_alone(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    group = await ProcessGroup.start(
        ["/bin/sh", "-c", 'sleep 300 > /dev/null 2>&1 & echo $! >> "$PIDS"'], env={"PIDS": str(pid_file)}
    )
    assert await group.wait() == 0
    assert await wait_until_async(lambda: pids(pid_file), 5)
    left = pids(pid_file)[0]
    assert pid_alive(left)  # the leader is reaped, its child lives on in the group
    assert await group.stop()
    assert await wait_until_async(lambda: not pid_alive(left), 5)
    group.kill()  # nothing of it is left: no signal goes anywhere


async def test_a_step_ends_with_its_leader_when_what_it_left_holds_the_output(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = 'sleep 300 & echo $! >> "$PIDS"; echo done'  # the sleep keeps the output pipe open
    done = await asyncio.wait_for(run(["/bin/sh", "-c", script], timeout=None, env={"PIDS": str(pid_file)}), 30)
    assert (done.returncode, done.lines) == (0, ["done"])
    assert await all_gone(pid_file)


async def test_a_step_that_closes_its_output_early_runs_to_its_end() -> None:
    done = await run(["/bin/sh", "-c", "echo early; exec >&- 2>&-; sleep 1.5; exit 4"], timeout=60)
    assert (done.returncode, done.lines) == (4, ["early"])  # not killed a moment after its output ended


def test_the_server_runs_processes_only_through_the_runner() -> None:
    """One way to run a child process: nothing else in app/ starts one or signals a group. Allowed:
    the runner; the registry's sweep (it ends an earlier run's groups and processes); the catalog
    snapshot tool (a maintainer's command line, not the server)."""
    app = Path(__file__).resolve().parents[2] / "app"
    allowed = {"process_group.py": "", "acp/orphans.py": "os.kill", "agents/catalog_snapshot.py": "subprocess.run("}
    spawning = re.compile(
        r"create_subprocess_\w+\(|subprocess\.(run|Popen|call|check_call|check_output)\(|"
        r"os\.(killpg|fork|forkpty|spawn\w*|posix_spawn\w*|exec\w+)\(|os\.kill\(\w+, (?!0\))"
    )
    found = []
    for path in sorted(app.rglob("*.py")):
        name = path.relative_to(app).as_posix()
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = spawning.search(text)
            if match and name != "process_group.py" and not match[0].startswith(allowed.get(name) or "\0"):
                found.append(f"app/{name}:{number}: {text.strip()}")
    assert not found, "start and signal processes with app/process_group.py:\n" + "\n".join(found)
