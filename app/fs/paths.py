"""Path resolution (behavior §8.1), optional confinement to root directories, OS error mapping."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache

from app.errors import BridgeError, InvalidRequest, PermissionDenied, ServiceUnavailable, StreamError

from .beneath import Beneath, Escape, Walk


def clean_relative(path: str) -> list[str] | None:
    """The normal components of a relative path (``.`` and empty ones dropped), or None when the
    path has a ``..`` component or is absolute."""
    if path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return parts


def resolve(path: str, root: str) -> str:
    """Absolute paths are used as given; relative ones are joined to ``root``; ``..`` is refused.
    A NUL byte can name no file (the OS refuses it): a 400, before any system call."""
    if "\x00" in path:
        raise InvalidRequest(f"invalid path: contains a NUL byte: {path!r}")
    if path.startswith("/"):
        return path
    parts = clean_relative(path)
    if parts is None:
        raise InvalidRequest(f"invalid relative path: {path}")
    return os.path.join(root, *parts) if parts else root


def home_dir() -> str:
    return os.path.expanduser("~")


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def real_location(path: str, *, follow: bool = True) -> str:
    """Where ``path`` really is. With ``follow=False`` a final symlink is the entry itself (delete,
    move), so only its directory is resolved."""
    path = os.path.abspath(path)
    if follow:
        return os.path.realpath(path)
    head, tail = os.path.split(path)
    if tail in ("", ".", ".."):
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(head), tail)


class Confinement:
    """Allowed root directories; empty means no confinement (the legacy behaviour).

    ``check`` refuses early, with the legacy error, a path whose real location is outside every
    root. The operations themselves then reach the path through ``open``/``parent``, which walk it
    from a descriptor of the root (``app.fs.beneath``), so a symlink swapped in after the check
    still cannot lead out."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = tuple(os.path.realpath(os.path.expanduser(r)) for r in roots)
        self._beneath = Beneath(self.roots)

    @property
    def enabled(self) -> bool:
        return bool(self.roots)

    def allows(self, path: str, *, follow: bool = True) -> bool:
        if not self.roots:
            return True
        try:
            real = real_location(path, follow=follow)
        except OSError:
            return True  # changing under us: the operation's own walk decides
        return any(is_within(real, root) for root in self.roots)

    def check(self, path: str, *, follow: bool = True) -> None:
        if not self.allows(path, follow=follow):
            raise self.denied(path)

    @staticmethod
    def denied(path: str) -> PermissionDenied:
        return PermissionDenied(f"path is outside the allowed filesystem roots: {path}")

    def pin(self, path: str, *, follow: bool = True, create_parents: bool = False) -> Pin:
        """Where to reach ``path``: confined, through the directory a walk from the root's
        descriptor found (missing parents made with ``create_parents``); unconfined, the path
        itself. Blocking (touches the disk): run in a thread. Close the pin when done."""
        if not self.roots:
            return Pin(path, None)
        try:
            return Pin(path, self._beneath.walk(path, follow=follow, create_parents=create_parents))
        except Escape as exc:
            raise self.denied(path) from exc

    def open(self, path: str, flags: int, mode: int = 0o666, *, follow: bool = True) -> int:
        """``os.open`` of ``path``, confined. Blocking: run in a thread."""
        with self.pin(path, follow=follow) as pin:
            return os.open(pin.name, pin.flags(flags, follow), mode, dir_fd=pin.dir_fd)


class Pin:
    """An entry to operate on: ``dir_fd`` + ``name`` for the ``os`` functions that take them, and
    ``path`` for those that take only paths (through the open directory when confined). Confined,
    the walk has resolved the entry, so a final symlink is never followed (``nofollow``)."""

    def __init__(self, requested: str, walk: Walk | None) -> None:
        self.requested = requested
        self.walk = walk
        self.dir_fd: int | None = walk.dir_fd if walk is not None else None
        self.name = walk.name if walk is not None else requested
        self.path = walk.path if walk is not None else requested

    @property
    def confined(self) -> bool:
        return self.walk is not None

    def flags(self, flags: int, follow: bool = True) -> int:
        flags |= os.O_CLOEXEC
        return flags | os.O_NOFOLLOW if (self.confined or not follow) else flags

    def follow(self, follow: bool = True) -> bool:
        """``follow_symlinks`` for stat-like calls on the entry."""
        return follow and not self.confined

    def undo_created(self) -> None:
        if self.walk is not None:
            self.walk.undo_created()

    def close(self) -> None:
        if self.walk is not None:
            self.walk.close()

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@lru_cache(maxsize=8)
def confinement(roots: tuple[str, ...]) -> Confinement:
    return Confinement(roots)


def os_message(exc: OSError) -> str:
    """The OS error text as the legacy server printed it (Rust's io::Error display)."""
    if exc.errno is not None and exc.strerror:
        return f"{exc.strerror} (os error {exc.errno})"
    return str(exc)


def fs_error(exc: OSError, path: str) -> BridgeError:
    """Not found -> 400 ``path not found``; out of descriptors -> 503; anything else -> 502 with the
    OS text (behavior §1.2)."""
    if exc.errno == errno.ENOENT:
        return InvalidRequest(f"path not found: {path}")
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return ServiceUnavailable(os_message(exc))
    return StreamError(os_message(exc))


def os_error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def rfc3339(ns: int) -> str:
    """UTC with ``+00:00`` and up to 9 fraction digits, trailing zeros dropped (legacy fs format)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text + "+00:00"
