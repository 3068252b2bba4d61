"""Session skills (legacy `skills` on create): find skill directories and link them where agents look.

A skill is a directory holding a ``SKILL.md``. A source is searched in the directory itself, in
``skills/*`` and in its direct children, optionally filtered by name. Each skill found is linked into
``.agents/skills/<name>``, ``.claude/skills/<name>`` and ``.opencode/skill/<name>`` of the session's
working directory. ``git``/``github`` sources are cloned (shallow) into the data directory first.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from app.errors import InvalidRequest, StreamError

LINK_DIRS = (".agents/skills", ".claude/skills", ".opencode/skill")
CLONE_TIMEOUT = 120.0


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


async def _clone(url: str, ref: str | None, cache: Path) -> Path:
    target = cache / hashlib.sha256(f"{url}#{ref or ''}".encode()).hexdigest()[:16]
    if (target / ".git").is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    argv = ["git", "clone", "--quiet", "--depth", "1"]
    if ref:
        argv += ["--branch", ref]
    argv += [url, str(target)]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await asyncio.wait_for(proc.communicate(), CLONE_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise StreamError(f"cannot fetch skill source {url}: {exc}") from exc
    if proc.returncode != 0:
        raise StreamError(f"cannot fetch skill source {url}: {stderr.decode(errors='replace').strip()}")
    return target


async def resolve_source(source: dict[str, Any], base: Path, cache: Path) -> dict[str, Path]:
    kind = source.get("type")
    where = str(source.get("source", ""))
    if kind == "local":
        root = Path(os.path.expanduser(where))
        root = root if root.is_absolute() else base / root
        if not root.is_dir():
            raise InvalidRequest(f"local skill directory not found: {root}")
    elif kind in ("github", "git"):
        url = f"https://github.com/{where}.git" if kind == "github" else where
        root = await _clone(url, source.get("ref"), cache)
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


async def link_requested_skills(request: dict[str, Any], cache: Path) -> None:
    """The create request's ``skills``: resolve each source (git ones cloned into ``cache``) and link
    the skills found into the session's directory (legacy step 4 of create, before normalisation)."""
    config = request.get("skills")
    if not config:
        return
    base = Path(os.getcwd())
    cwd = base / os.path.expanduser(request["directory"]) if request.get("directory") else base
    found: dict[str, Path] = {}
    for source in config.get("sources", []):
        found.update(await resolve_source(source, base, cache))
    if cwd.is_dir():
        link_skills(found, cwd)
