"""Path resolution that cannot leave a root directory, whatever changes on disk meanwhile.

A path is walked component by component from an open descriptor of the root: every directory is
opened relative to its parent (``dir_fd``) with ``O_NOFOLLOW | O_DIRECTORY``, and a symlink met on
the way is read and resolved by the walk itself, so a link (or a directory swapped for a link while
the walk runs) can only lead somewhere inside the root. ``..`` climbs the walked directories, never
above the root. What the caller gets is the descriptor of the final component's directory and its
name, to be used with ``dir_fd`` and ``O_NOFOLLOW`` / ``follow_symlinks=False``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # the kernel's own limit (ELOOP)


class Escape(Exception):
    """The path, or a symlink on it, leads out of every root."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


class Beneath:
    """Walks paths inside ``roots`` (real, absolute directory paths)."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots

    def _root_of(self, path: str) -> tuple[str, list[str]] | None:
        for root in self.roots:
            if _within(path, root):
                return root, _split(path[len(root) :])
        return None

    def locate(self, path: str) -> tuple[str, list[str]]:
        """The root ``path`` lies in and the components below it. A path that names a root only
        through a symlink outside the roots (``/link-to-root/x``) is found by its real location."""
        path = os.path.abspath(path)  # lexical; ".." components are kept for the walk
        if "/../" not in path + "/":
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
        ``name`` is ``"."`` when the path is the root itself. With ``create_parents`` missing
        directories on the way are made (``walk.created``, to undo them). Close it when done."""
        root, parts = self.locate(path)
        walk = Walk(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        try:
            walk.name = self._walk(path, parts, walk, follow, create_parents)
        except BaseException:
            walk.close()
            raise
        return walk

    def _walk(self, path: str, parts: list[str], walk: Walk, follow: bool, create: bool) -> str:
        fds = walk.fds
        pending = deque(parts)
        links = 0
        while pending:
            name = pending.popleft()
            if name == "..":
                if len(fds) == 1:
                    raise Escape(path)
                walk.spent.append(fds.pop())  # closed with the walk: `created` may refer to it
                continue
            try:
                st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not pending:
                    return name  # a new entry: its directory is known
                if not create:
                    raise
                os.mkdir(name, 0o777, dir_fd=fds[-1])
                walk.created.append((fds[-1], name))
                fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
                continue
            if stat.S_ISLNK(st.st_mode) and (pending or follow):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                target = os.readlink(name, dir_fd=fds[-1])
                if target.startswith("/"):
                    found = self._root_of(os.path.normpath(target))
                    if found is None:
                        raise Escape(path)
                    new_root, below = found
                    walk.spent.extend(fds)
                    fds.clear()
                    fds.append(os.open(new_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
                    pending.extendleft(reversed(below))
                else:
                    pending.extendleft(reversed(_split(target)))
                continue
            if not pending:
                return name
            # O_NOFOLLOW: a link swapped in after the stat fails here instead of being followed.
            fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
        # The path was the root itself, or ended in ".." / a link to a directory.
        return "."


class Walk:
    """The result of ``Beneath.walk``: ``dir_fd`` (the entry's directory, open), ``name``, the
    directories made on the way, and ``path``: a name for the entry that goes through the open
    directory (``/proc/self/fd/<fd>/<name>``), for code that only takes paths."""

    def __init__(self, root_fd: int) -> None:
        self.fds = [root_fd]
        self.spent: list[int] = []
        self.created: list[tuple[int, str]] = []
        self.name = "."

    @property
    def dir_fd(self) -> int:
        return self.fds[-1]

    @property
    def path(self) -> str:
        base = f"/proc/self/fd/{self.dir_fd}"
        return base if self.name == "." else f"{base}/{self.name}"

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
