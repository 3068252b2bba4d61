"""Skill sources cloned with git (app/sessions/skills.py), against a `git` on PATH that hangs, fails
or succeeds as told: a clone that hangs fails within its time limit naming it, leaving no process
and no folder, and the next create clones afresh; a half-made folder is never taken for a clone."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.acp.orphans import ProcessRegistry
from app.errors import StreamError
from app.sessions.skills import COMPLETE, link_requested_skills
from tests.support import pid_alive, wait_until_async

URL = "https://git.example/skills.git"

# Makes the folder it is asked to clone into (its last argument) as git does, half-filled, then as
# $GIT_MODE says: hangs (with a child and a grandchild), fails, or finishes a clone holding a skill.
FAKE_GIT = """#!/bin/sh
echo "$@" >> "$GIT_CALLS"
for target; do :; done
mkdir -p "$target/.git" "$target/my-skill"
echo "---\\nname: my-skill\\n---" > "$target/my-skill/SKILL.md"
case "$GIT_MODE" in
hang)
    echo $$ >> "$GIT_PIDS"
    sh -c 'sleep 300 & echo $! >> "$GIT_PIDS"; wait' &
    echo $! >> "$GIT_PIDS"
    wait ;;
fail)
    echo "fatal: repository not found" >&2
    exit 128 ;;
quiet)
    exit 1 ;;
esac
"""


@pytest.fixture
def git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake `git` first on PATH; yields where it writes down its calls and pids."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "git"
    program.write_text(FAKE_GIT)
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GIT_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("GIT_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("GIT_MODE", "ok")
    yield tmp_path


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[ProcessRegistry]:
    processes = ProcessRegistry(tmp_path / "processes")
    processes.open()
    yield processes
    processes.close()


def calls(where: Path) -> int:
    path = where / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def pids(where: Path) -> list[int]:
    path = where / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


async def create(tmp_path: Path, registry: ProcessRegistry | None, timeout: float = 30.0) -> Path:
    """The skills step of a session create; returns the session's directory."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    request = {"directory": str(work), "skills": {"sources": [{"type": "git", "source": URL}]}}
    await asyncio.wait_for(link_requested_skills(request, tmp_path / "cache", registry, timeout), 60)
    return work


async def test_a_hanging_clone_fails_in_time_naming_it_and_leaves_nothing(
    git: Path, registry: ProcessRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_MODE", "hang")
    with pytest.raises(StreamError) as caught:
        await create(git, registry, timeout=1.0)
    assert (
        caught.value.problem()["detail"]
        == f"stream error: cannot fetch skill source {URL}: git clone did not finish in 1s"
    )
    assert len(pids(git)) == 3  # git, its child and its grandchild
    assert await wait_until_async(lambda: not any(pid_alive(p) for p in pids(git)), 10)
    assert os.listdir(git / "cache") == []  # the half-made clone is gone
    registry.close()
    assert not registry.path.exists()  # its group and its folder were recorded, and ended

    # The next create clones afresh, and the one after uses that clone.
    monkeypatch.setenv("GIT_MODE", "ok")
    work = await create(git, None)
    assert calls(git) == 2
    link = work / ".agents/skills/my-skill"
    assert (link / "SKILL.md").is_file()
    (clone,) = (git / "cache").iterdir()
    assert (clone / COMPLETE).is_file() and link.resolve() == clone / "my-skill"
    await create(git, None)
    assert calls(git) == 2


async def test_a_failed_clone_says_why_and_leaves_nothing(git: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_MODE", "fail")
    with pytest.raises(StreamError, match=f"cannot fetch skill source {URL}: fatal: repository not found$"):
        await create(git, None)
    monkeypatch.setenv("GIT_MODE", "quiet")
    with pytest.raises(StreamError, match=f"cannot fetch skill source {URL}: git clone exited with code 1$"):
        await create(git, None)
    assert os.listdir(git / "cache") == []


async def test_git_is_not_found_is_said(git: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(git / "nowhere"))
    with pytest.raises(StreamError, match=f"cannot fetch skill source {URL}: .*No such file or directory: 'git'"):
        await create(git, None)


async def test_a_folder_half_made_before_clones_were_staged_is_cloned_again(git: Path) -> None:
    work = await create(git, None)
    (clone,) = (git / "cache").iterdir()
    (clone / COMPLETE).unlink()  # as an interrupted clone of an earlier version left it
    (clone / "my-skill" / "SKILL.md").write_text("partial")
    await create(git, None)
    assert calls(git) == 2
    assert [p.name for p in (git / "cache").iterdir()] == [clone.name]
    assert (clone / COMPLETE).is_file() and (clone / "my-skill" / "SKILL.md").read_text().startswith("---")
    assert (work / ".claude/skills/my-skill/SKILL.md").is_file()
