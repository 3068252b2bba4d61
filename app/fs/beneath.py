"""Path resolution that cannot leave a root directory, whatever changes on disk meanwhile.

A path is walked component by component from an open descriptor of the root: every directory is
opened relative to its parent (``dir_fd``) with ``O_NOFOLLOW | O_DIRECTORY``, and a symlink met on
the way is read and resolved by the walk itself, so a link (or a directory swapped for a link while
the walk runs) can only lead somewhere inside the root. ``..`` climbs the walked directories, never
above the root. What the caller gets is the descriptor of the final component's directory and its
name: every later step (open, create, rename, unlink...) goes through that descriptor with
``dir_fd`` and no-follow flags, never through a path that would be resolved again.

The directories are opened with ``O_PATH``: enough to serve as ``dir_fd`` (and to walk through a
directory one may search but not read), nothing that reads or changes them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from collections.abc import Callable

DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A directory to list or to change the metadata of (O_PATH descriptors can do neither).
READ_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # the kernel's own limit (ELOOP)


class Escape(Exception):
    """The path, or a symlink on it, leads out of every root."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


class Walk:
    """Where a walk ended: ``dir_fd`` (the entry's directory, held open) and ``name`` (``"."``
    when the path is the walk's root itself); ``trail`` is the real path of ``dir_fd`` below the
    root, as components; ``created`` the directories made on the way (to undo them). Close it
    when done."""

    def __init__(self, root_fd: int) -> None:
        self.fds = [root_fd]
        self.trail: list[str] = []
        self.spent: list[int] = []
        self.created: list[tuple[int, str]] = []
        self.name = "."

    @property
    def dir_fd(self) -> int:
        return self.fds[-1]

    def undo_created(self) -> None:
        for dir_fd, name in reversed(self.created):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=dir_fd)
        self.created.clear()

    def close(self) -> None:
        for fd in self.fds + self.spent:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds, self.spent = [], []

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Beneath:
    """Walks absolute paths inside ``roots`` (real, absolute directory paths). With ``clamp``
    (the single root ``/``: no confinement) ``..`` at the root stays there, as the kernel does."""

    def __init__(self, roots: tuple[str, ...], *, clamp: bool = False) -> None:
        self.roots = roots
        self.clamp = clamp

    def _root_of(self, path: str) -> tuple[str, list[str]] | None:
        for root in self.roots:
            if _within(path, root):
                return root, split(path[len(root) :])
        return None

    def locate(self, path: str) -> tuple[str, list[str]]:
        """The root ``path`` lies in and the components below it. A path that names a root only
        through a symlink outside the roots (``/link-to-root/x``) is found by its real location."""
        path = os.path.abspath(path)
        found = self._root_of(path)
        if found is not None:
            return found
        head, tail = os.path.split(path)
        real = os.path.join(os.path.realpath(head), tail) if tail not in ("", ".", "..") else os.path.realpath(path)
        found = self._root_of(real)
        if found is None:
            raise Escape(path)
        return found

    def walk(self, path: str, *, follow: bool = True, create_parents: bool = False) -> Walk:
        """The open directory ``path``'s entry is in, and the entry's name there. With ``follow`` a
        final symlink is resolved (inside the root too); without, the link itself is the entry.
        With ``create_parents`` missing directories on the way are made (``walk.created``)."""
        root, parts = self.locate(path)
        walk = Walk(os.open(root, DIR_FLAGS))

        def jump(target: str) -> tuple[int, list[str]]:
            found = self._root_of(os.path.normpath(target))
            if found is None:
                raise Escape(path)
            return os.open(found[0], DIR_FLAGS), found[1]

        try:
            walk.name = _walk(walk, parts, follow, create_parents, path, jump, self.clamp)
        except BaseException:
            walk.close()
            raise
        return walk


def walk_at(dir_fd: int, parts: list[str], *, follow: bool = True, create_parents: bool = False) -> Walk:
    """A walk beneath the open directory ``dir_fd`` (its own copy of it): a link that climbs above
    it with ``..`` or is absolute is an ``Escape``."""
    label = "/".join(parts)
    walk = Walk(os.dup(dir_fd))

    def jump(target: str) -> tuple[int, list[str]]:
        raise Escape(label)

    try:
        walk.name = _walk(walk, parts, follow, create_parents, label, jump, False)
    except BaseException:
        walk.close()
        raise
    return walk


def _walk(
    walk: Walk,
    parts: list[str],
    follow: bool,
    create: bool,
    path: str,
    jump: Callable[[str], tuple[int, list[str]]],
    clamp: bool,
) -> str:
    fds, trail = walk.fds, walk.trail
    pending = deque(parts)
    links = 0
    while pending:
        name = pending.popleft()
        if name == "..":
            if len(fds) == 1:
                if clamp:
                    continue
                raise Escape(path)
            walk.spent.append(fds.pop())  # closed with the walk: `created` may refer to it
            trail.pop()
            continue
        try:
            st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
        except FileNotFoundError:
            if not pending:
                return name  # a new entry: its directory is known
            if not create:
                raise
            try:
                os.mkdir(name, 0o777, dir_fd=fds[-1])
            except FileExistsError:
                pending.appendleft(name)  # made meanwhile by someone else: look again
                continue
            walk.created.append((fds[-1], name))
            fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
            trail.append(name)
            continue
        if stat.S_ISLNK(st.st_mode) and (pending or follow):
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            target = os.readlink(name, dir_fd=fds[-1])
            if target.startswith("/"):
                new_root, below = jump(target)
                walk.spent.extend(fds)
                fds.clear()
                fds.append(new_root)
                trail.clear()
                pending.extendleft(reversed(below))
            else:
                pending.extendleft(reversed(split(target)))
            continue
        if not pending:
            return name
        # O_NOFOLLOW: a link swapped in after the stat fails here instead of being followed.
        fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
        trail.append(name)
    # The path was the root itself, or ended in ".." / a link to a directory.
    return "."
