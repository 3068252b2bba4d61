"""The filesystem operations (behavior §8.2) on resolved absolute paths. Synchronous: the callers
run them in a worker thread.

Errors surface as ``OSError``; callers map them with ``paths.fs_error`` so that the path in a
"not found" message is the one the client asked about.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import stat
import tempfile
from typing import Any, BinaryIO

from app.errors import InvalidRequest

from .paths import Confinement, fs_error, os_error, rfc3339


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which is not thread-safe later.
UMASK = _current_umask()


def _modified(st: os.stat_result) -> str | None:
    try:
        return rfc3339(st.st_mtime_ns)
    except (OverflowError, ValueError, OSError):
        return None


def _info(st: os.stat_result) -> dict[str, Any]:
    info: dict[str, Any] = {
        "entryType": "directory" if stat.S_ISDIR(st.st_mode) else "file",
        "size": st.st_size,
    }
    modified = _modified(st)
    if modified is not None:
        info["modified"] = modified
    return info


# ---- reading ---------------------------------------------------------------------------------
def list_entries(path: str) -> list[dict[str, Any]]:
    """FsEntry objects in OS order; an entry's own metadata (a symlink to a directory is a file)."""
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise InvalidRequest(f"path is not a directory: {path}")
        entries = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while listing
                entries.append({"name": entry.name, "path": os.path.join(path, entry.name), **_info(st)})
        return entries
    except OSError as exc:
        raise fs_error(exc, path) from exc


def stat_path(path: str) -> dict[str, Any]:
    """FsStat, following symlinks."""
    try:
        return {"path": path, **_info(os.stat(path))}
    except OSError as exc:
        raise fs_error(exc, path) from exc


def open_file(path: str) -> tuple[BinaryIO, int]:
    """An open regular file and its size; 400 ``path is not a file`` for anything else."""
    try:
        # Checked before opening: opening a FIFO would block until a writer shows up.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise InvalidRequest(f"path is not a file: {path}")
        fh = open(path, "rb")  # the caller closes it
    except OSError as exc:
        raise fs_error(exc, path) from exc
    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode):
        fh.close()
        raise InvalidRequest(f"path is not a file: {path}")
    return fh, st.st_size


def read_text(path: str, line: int | None = None, limit: int | None = None) -> str:
    """UTF-8 text (undecodable bytes replaced), from 1-based ``line``, at most ``limit`` lines.
    Line endings are kept as they are."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        if line is None and limit is None:
            return fh.read()
        start = max((line or 1) - 1, 0)
        stop = start + limit if limit is not None else None
        return "".join(itertools.islice(fh, start, stop))


# ---- writing ---------------------------------------------------------------------------------
def make_dirs(path: str) -> list[str]:
    """``mkdir -p``; returns the directories it created, outermost first (to undo them)."""
    missing = []
    current = path
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    created = []
    try:
        for directory in reversed(missing):
            try:
                os.mkdir(directory)
            except FileExistsError:
                if not os.path.isdir(directory):
                    raise
                continue
            created.append(directory)
    except OSError:
        remove_dirs(created)
        raise
    return created


def remove_dirs(created: list[str]) -> None:
    """Undo ``make_dirs``: remove the directories it created if they are still empty."""
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


class AtomicWriter:
    """Write a file all-or-nothing: bytes go to a hidden temporary file in the target's directory,
    which replaces the target only on ``commit``. Missing parents are created (and removed again on
    ``abort``). A symlinked target is written through, as a plain write would."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.target = os.path.realpath(path) if os.path.islink(path) else path
        if os.path.isdir(self.target):
            raise os_error(errno.EISDIR)
        parent = os.path.dirname(self.target) or "."
        self._created = make_dirs(parent)
        try:
            fd, self._tmp = tempfile.mkstemp(dir=parent, prefix="." + os.path.basename(self.target)[:32] + ".")
        except OSError:
            remove_dirs(self._created)
            raise
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self.size = 0

    def write(self, data: bytes) -> None:
        assert self._file is not None
        self._file.write(data)
        self.size += len(data)

    def commit(self) -> int:
        assert self._file is not None
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            try:
                existing: os.stat_result | None = os.stat(self.target)
            except FileNotFoundError:
                existing = None
            fd = self._file.fileno()
            if existing is not None:  # the replacement keeps the old file's mode and owner
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(OSError):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
            else:
                os.fchmod(fd, 0o666 & ~UMASK)
            self._file.close()
            self._file = None
            os.replace(self._tmp, self.target)
        except BaseException:
            self.abort()
            raise
        return self.size

    def abort(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
        remove_dirs(self._created)
        self._created = []


def write_bytes(path: str, data: bytes) -> int:
    writer = AtomicWriter(path)
    try:
        writer.write(data)
    except BaseException:
        writer.abort()
        raise
    return writer.commit()


# ---- changing entries ------------------------------------------------------------------------
def delete_entry(path: str, recursive: bool) -> None:
    """A file or symlink is unlinked; a directory removed if empty, or with everything in it."""
    try:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            if recursive:
                shutil.rmtree(path)
            else:
                os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as exc:
        raise fs_error(exc, path) from exc


def mkdir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise fs_error(exc, path) from exc


def _aside_name(path: str) -> str:
    parent, name = os.path.split(path)
    for n in itertools.count():
        candidate = os.path.join(parent, f".{name[:32]}.replaced-{os.getpid()}-{n}")
        if not os.path.lexists(candidate):
            return candidate
    raise AssertionError("unreachable")


def _remove_any(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def move_entry(source: str, dest: str, overwrite: bool) -> None:
    """Rename ``source`` to ``dest`` (no copy across filesystems). An existing ``dest`` is replaced
    only with ``overwrite``; it is moved aside first and restored if the rename fails."""
    if not os.path.lexists(source):
        raise InvalidRequest(f"path not found: {source}")
    aside = None
    if os.path.lexists(dest):
        if not overwrite:
            raise InvalidRequest(f"destination already exists: {dest}")
        if os.path.samestat(os.lstat(source), os.lstat(dest)):
            return  # already there
        aside = _aside_name(dest)
        try:
            os.rename(dest, aside)
        except OSError as exc:
            raise fs_error(exc, dest) from exc
    created: list[str] = []
    try:
        created = make_dirs(os.path.dirname(dest))
        os.rename(source, dest)
    except OSError as exc:
        remove_dirs(created)
        if aside is not None:
            with contextlib.suppress(OSError):
                os.rename(aside, dest)
        raise fs_error(exc, source if exc.errno == errno.ENOENT else dest) from exc
    if aside is not None:
        _remove_any(aside)


# ---- files read whole for a client (attachments) -----------------------------------------------
def _pseudo_devices() -> set[int]:
    """Devices of /proc and /sys: their "regular" files claim a size of 0 or 4096 whatever they
    hold (or stream without end), so a size check means nothing there."""
    devices = set()
    for mount in ("/proc", "/sys"):
        with contextlib.suppress(OSError):
            devices.add(os.stat(mount).st_dev)
    return devices


def read_regular(fence: Confinement, path: str, limit: int) -> bytes:
    """The whole content of the regular file ``path``, refused (400/403, naming the path) when it is
    outside the roots, not a regular file, on /proc or /sys, or larger than ``limit`` bytes. The
    size is checked on the open file before reading, and nothing past ``limit`` is ever read.
    Blocking: run in a worker thread."""
    try:
        # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (it is refused below).
        fd = fence.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise fs_error(exc, path) from exc
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_dev in _pseudo_devices():
            raise InvalidRequest(f"path is not a regular file: {path}")
        if st.st_size > limit:
            raise InvalidRequest(f"file too large: {path} ({st.st_size} bytes, limit {limit})")
        chunks = []
        left = limit + 1  # one byte more: a file that grew since the fstat is caught here
        while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise InvalidRequest(f"file too large: {path} (over the limit of {limit} bytes)")
        return data
