"""Path resolution (behavior §8.1), optional confinement to root directories, OS error mapping."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from app.errors import BridgeError, InvalidRequest, PermissionDenied, ServiceUnavailable, StreamError

from .beneath import Beneath, Escape, Walk
from .temps import TempBook


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
    root. The operations themselves then reach the path through ``pin``, which walks it from a
    descriptor of the root (``app.fs.beneath``; of ``/`` without confinement), so a symlink
    swapped in after the check still cannot lead out, and work through the descriptors it holds.
    ``temps`` records the temporary files the operations make (``app.fs.temps``)."""

    def __init__(self, roots: Iterable[str], temps: TempBook | None = None) -> None:
        self.roots = tuple(os.path.realpath(os.path.expanduser(r)) for r in roots)
        self.temps = temps if temps is not None else TempBook(None)
        self._beneath = Beneath(self.roots) if self.roots else Beneath(("/",), clamp=True)

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

    def pin(self, path: str, *, follow: bool = True, create_parents: bool = False) -> Walk:
        """The open directory of ``path``'s entry and its name, by a walk from the root's
        descriptor (missing parents made with ``create_parents``). Use ``dir_fd`` + ``name`` with
        no-follow flags: the walk has resolved what is to be followed. Blocking (touches the disk):
        run in a thread. Close it when done."""
        if "\x00" in path:
            raise InvalidRequest(f"invalid path: contains a NUL byte: {path!r}")
        try:
            return self._beneath.walk(path, follow=follow, create_parents=create_parents)
        except Escape as exc:
            raise self.denied(path) from exc

    def open(self, path: str, flags: int, mode: int = 0o666, *, follow: bool = True) -> int:
        """``os.open`` of ``path``, confined. Blocking: run in a thread."""
        with self.pin(path, follow=follow) as pin:
            return os.open(pin.name, flags | NOFOLLOW, mode, dir_fd=pin.dir_fd)


# For every open of a pinned entry: a final link was resolved by the walk (or is the entry itself).
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


@lru_cache(maxsize=8)
def confinement(roots: tuple[str, ...], temps: str | None = None) -> Confinement:
    return Confinement(roots, TempBook(temps))


class _Configured(Protocol):
    fs_roots: list[str]

    def resolved_data_dir(self) -> Path: ...


TEMPS = "temps"  # the data dir's folder of temporary-file records (app.fs.temps)


def fence_for(settings: _Configured) -> Confinement:
    """The confinement of a server's settings, recording temporary files in its data dir."""
    return confinement(tuple(settings.fs_roots), str(settings.resolved_data_dir() / TEMPS))


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
