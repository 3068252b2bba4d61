"""Terminals: real processes, output kept within a byte limit at character boundaries, exit status,
process-group kill, and the in-memory output lookup used for tool results."""

from __future__ import annotations

import sys
from pathlib import Path

from app.sessions.terminals import (
    SessionTerminals,
    Terminal,
    exit_status,
    incomplete_tail,
    utf8_cut,
)
from tests.support import pid_alive, wait_until_async


def test_utf8_cut_skips_continuation_bytes() -> None:
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert utf8_cut(data, 0) == 0
    assert utf8_cut(data, 2) == 3  # inside é
    assert utf8_cut(data, 4) == 6  # inside €
    assert utf8_cut(data, 7) == 10  # inside 😀: nothing left
    for start in range(len(data) + 1):
        data[utf8_cut(data, start) :].decode()  # always decodable


def test_incomplete_tail() -> None:
    full = "a€".encode()
    assert incomplete_tail(full) == 0
    assert incomplete_tail(full[:-1]) == 2
    assert incomplete_tail(full[:-2]) == 1
    assert incomplete_tail(b"") == 0
    assert incomplete_tail("😀".encode()[:3]) == 3


def test_exit_status_shapes() -> None:
    assert exit_status(0) == {"exitCode": 0, "signal": None}
    assert exit_status(3) == {"exitCode": 3, "signal": None}
    assert exit_status(-9) == {"exitCode": None, "signal": "SIGKILL"}


async def start(command: str, *args: str, limit: int = 1 << 20, cwd: str = "/", **env: str) -> Terminal:
    return await Terminal.start("term_t", command, list(args), env=env, cwd=cwd, output_limit=limit)


async def test_shell_line_env_cwd_and_exit_code(tmp_path: Path) -> None:
    terminal = await start('echo "$GREETING from $(pwd)"; echo err >&2; exit 4', cwd=str(tmp_path), GREETING="hi")
    assert await terminal.wait(10)
    assert terminal.snapshot() == {
        "output": f"hi from {tmp_path}\nerr\n",
        "truncated": False,
        "exitStatus": {"exitCode": 4, "signal": None},
    }


async def test_command_with_args_is_not_a_shell_line() -> None:
    terminal = await start(sys.executable, "-c", "import sys; print(sys.argv[1:])", "$HOME", "a b")
    assert await terminal.wait(10)
    assert terminal.output() == "['$HOME', 'a b']\n"


async def test_output_limit_drops_from_the_start_at_a_character_boundary() -> None:
    # 10 x "€" (3 bytes each) with a 10-byte limit: the last 3 whole characters survive.
    terminal = await start("printf '€€€€€€€€€€'", limit=10)
    assert await terminal.wait(10)
    snap = terminal.snapshot()
    assert snap["output"] == "€€€"
    assert snap["truncated"] is True


async def test_running_terminal_has_no_exit_status_until_it_exits() -> None:
    terminal = await start("echo started; read line")  # stdin is /dev/null: read ends at once
    assert await terminal.wait(10)
    terminal = await start("echo started; exec sleep 30")
    await wait_until_async(terminal.output, 5)
    snap = terminal.snapshot()
    assert snap == {"output": "started\n", "truncated": False}
    terminal.kill()
    assert await terminal.wait(10)
    assert terminal.exit_status == {"exitCode": None, "signal": "SIGKILL"}


async def test_kill_reaches_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    terminal = await start(f"sleep 60 & echo $! > {pid_file}; echo ready; wait")
    await wait_until_async(terminal.output, 5)
    child = int(pid_file.read_text())
    assert pid_alive(child) and pid_alive(terminal.pid)
    await terminal.close()
    await wait_until_async(lambda: not pid_alive(child), 5)
    assert not pid_alive(child)
    assert not pid_alive(terminal.pid)


async def test_output_of_reads_active_and_released_terminals() -> None:
    terminals = SessionTerminals()
    assert terminals.output_of("term_1") is None
    terminal = await start("echo hello")
    terminals.active[terminal.id] = terminal
    assert await terminal.wait(10)
    assert terminals.output_of(terminal.id) == "hello\n"
    await terminals.release(terminal)
    assert terminal.id not in terminals.active
    assert terminals.output_of(terminal.id) == "hello\n"
    assert terminals.output_of("term_other") is None


async def test_close_all_kills_running_terminals() -> None:
    terminals = SessionTerminals()
    terminal = await start("exec sleep 60")
    terminals.active[terminal.id] = terminal
    await terminals.close_all()
    assert terminals.closed
    assert not pid_alive(terminal.pid)
    assert terminal.id in terminals.released
