"""Session skills (legacy `skills` on create): find skill directories and link them where agents look.

A skill is a directory holding a ``SKILL.md``. A source is searched in the directory itself, in
``skills/*`` and in its direct children, optionally filtered by name. Each skill found is linked into
``.agents/skills/<name>``, ``.claude/skills/<name>`` and ``.opencode/skill/<name>`` of the session's
working directory. ``git``/``github`` sources are cloned (shallow) into the cache directory first,
once per URL and ref: into a staging folder beside it (recorded for crash clean-up, like the clone's
process group), moved into place only when ``git`` has succeeded, so a failed, timed-out or
interrupted clone leaves nothing a later session would take for a clone.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from app.errors import InvalidRequest, StreamError
from app.process_group import Overdue, Recorder, run

LINK_DIRS = (".agents/skills", ".claude/skills", ".opencode/skill")
CLONE_TIMEOUT = 120.0
# In a clone's .git, made once git has succeeded, before the clone is moved into place.
COMPLETE = ".git/acp-rest-bridge-complete"
# git never asks for credentials (there is no one to answer): a private repository fails at once.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}


def find_skills(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if (root / "SKILL.md").is_file():
        found[root.name] = root
    for parent in (root / "skills", root):
        if not parent.is_dir():
            continue
        for child in sorted(parent.iterdir()):
            if child.is_dir() and (child / "SKILL.md").is_file():
                found.setdefault(child.name, child)
    return found


async def _clone(url: str, ref: str | None, cache: Path, recorder: Recorder | None, timeout: float) -> Path:
    target = cache / hashlib.sha256(f"{url}#{ref or ''}".encode()).hexdigest()[:16]
    if await asyncio.to_thread(_cloned, target):
        return target
    token = secrets.token_hex(4)
    staging = cache / f".{target.name}.staging-{token}"
    argv = ["git", "clone", "--quiet", "--depth", "1"]
    if ref:
        argv += ["--branch", ref]
    argv += ["--", url, str(staging)]  # (a URL is never taken for an option)
    try:
        await asyncio.to_thread(_prepare, cache, staging, recorder)
        done = await run(argv, timeout=timeout, what="git clone", env=GIT_ENV, recorder=recorder)
        if done.returncode != 0:
            reason = done.tail() or f"git clone exited with code {done.returncode}"
            raise StreamError(f"cannot fetch skill source {url}: {reason}")
        await asyncio.to_thread(_move_in, staging, target, token, recorder)
    except (OSError, Overdue) as exc:
        raise StreamError(f"cannot fetch skill source {url}: {exc}") from exc
    finally:
        # Shielded: a cancelled create still removes what its clone left.
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, staging, True))
        if recorder is not None:
            recorder.removed_dir(staging)
    return target


def _cloned(target: Path) -> bool:
    return (target / COMPLETE).is_file()


def _prepare(cache: Path, staging: Path, recorder: Recorder | None) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    if recorder is not None:
        recorder.made_dir(staging)  # before git makes it: a crash from here on leaves it recorded


def _move_in(staging: Path, target: Path, token: str, recorder: Recorder | None) -> None:
    (staging / COMPLETE).touch()
    if not os.path.lexists(target):
        try:
            staging.rename(target)
            return
        except OSError:
            if _cloned(target):  # another create (or server) cloned it meanwhile: that one is used
                return
            raise
    if _cloned(target):
        return
    # What a clone left before clones were staged, possibly half-made: replaced.
    old = target.with_name(f".{target.name}.old-{token}")
    if recorder is not None:
        recorder.made_dir(old)
    target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    if recorder is not None:
        recorder.removed_dir(old)


async def resolve_source(
    source: dict[str, Any], base: Path, cache: Path, recorder: Recorder | None = None, timeout: float = CLONE_TIMEOUT
) -> dict[str, Path]:
    kind = source.get("type")
    where = str(source.get("source", ""))
    if kind == "local":
        root = Path(os.path.expanduser(where))
        root = root if root.is_absolute() else base / root
        if not root.is_dir():
            raise InvalidRequest(f"local skill directory not found: {root}")
    elif kind in ("github", "git"):
        url = f"https://github.com/{where}.git" if kind == "github" else where
        root = await _clone(url, source.get("ref"), cache, recorder, timeout)
    else:
        raise InvalidRequest(f"unsupported skill source type: {kind}")
    if source.get("subpath"):
        root = root / str(source["subpath"])
        if not root.is_dir():
            raise InvalidRequest(f"skill search directory not found: {root}")
    skills = find_skills(root)
    wanted = source.get("skills")
    if wanted:
        skills = {name: path for name, path in skills.items() if name in wanted}
    if not skills:
        suffix = f" (filter: {', '.join(wanted)})" if wanted else ""
        raise InvalidRequest(f"no skills found in {where} ({kind}){suffix}")
    return skills


def link_skills(skills: dict[str, Path], cwd: Path) -> None:
    for name, path in skills.items():
        for rel in LINK_DIRS:
            link = cwd / rel / name
            try:
                link.parent.mkdir(parents=True, exist_ok=True)
                if link.is_symlink() or link.exists():
                    if link.is_symlink() and Path(os.readlink(link)) == path.resolve():
                        continue
                    if link.is_symlink():
                        link.unlink()
                    else:
                        continue  # a real directory of the user's: leave it alone
                link.symlink_to(path.resolve(), target_is_directory=True)
            except OSError as exc:
                raise StreamError(f"cannot link skill {name} into {link.parent}: {exc}") from exc


async def link_requested_skills(
    request: dict[str, Any], cache: Path, recorder: Recorder | None = None, timeout: float = CLONE_TIMEOUT
) -> None:
    """The create request's ``skills``: resolve each source (git ones cloned into ``cache``, each
    clone given ``timeout`` seconds, its process group and staging folder recorded with
    ``recorder``) and link the skills found into the session's directory (legacy step 4 of create,
    before normalisation)."""
    config = request.get("skills")
    if not config:
        return
    base = Path(os.getcwd())
    cwd = base / os.path.expanduser(request["directory"]) if request.get("directory") else base
    found: dict[str, Path] = {}
    for source in config.get("sources", []):
        found.update(await resolve_source(source, base, cache, recorder, timeout))
    if cwd.is_dir():
        link_skills(found, cwd)
