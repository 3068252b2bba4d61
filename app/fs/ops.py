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

from .paths import Confinement, Pin, fs_error, os_error, rfc3339

# Every operation takes the confinement to work under; this one allows everything (legacy).
UNCONFINED = Confinement(())


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
def list_entries(path: str, fence: Confinement = UNCONFINED) -> list[dict[str, Any]]:
    """FsEntry objects in OS order; an entry's own metadata (a symlink to a directory is a file)."""
    try:
        with fence.pin(path) as pin:
            if not stat.S_ISDIR(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=pin.follow()).st_mode):
                raise InvalidRequest(f"path is not a directory: {path}")
            fd = os.open(pin.name, pin.flags(os.O_RDONLY | os.O_DIRECTORY), dir_fd=pin.dir_fd)
        entries = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed while listing
                    entries.append({"name": entry.name, "path": os.path.join(path, entry.name), **_info(st)})
        finally:
            os.close(fd)
        return entries
    except OSError as exc:
        raise fs_error(exc, path) from exc


def stat_path(path: str, fence: Confinement = UNCONFINED) -> dict[str, Any]:
    """FsStat, following symlinks."""
    try:
        with fence.pin(path) as pin:
            return {"path": path, **_info(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=pin.follow()))}
    except OSError as exc:
        raise fs_error(exc, path) from exc


def _open_regular(fence: Confinement, path: str) -> int:
    """A descriptor of the regular file ``path``, or ``InvalidRequest`` (``OSError`` from the OS)."""
    # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (it is refused below).
    fd = fence.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InvalidRequest(f"path is not a file: {path}")
    os.set_blocking(fd, True)
    return fd


def open_file(path: str, fence: Confinement = UNCONFINED) -> tuple[BinaryIO, int]:
    """An open regular file and its size; 400 ``path is not a file`` for anything else."""
    try:
        fh = os.fdopen(_open_regular(fence, path), "rb")  # the caller closes it
    except OSError as exc:
        raise fs_error(exc, path) from exc
    return fh, os.fstat(fh.fileno()).st_size


def read_text(path: str, line: int | None = None, limit: int | None = None, fence: Confinement = UNCONFINED) -> str:
    """UTF-8 text (undecodable bytes replaced), from 1-based ``line``, at most ``limit`` lines.
    Line endings are kept as they are. A directory is ``EISDIR``, another non-file ``EINVAL``."""
    fd = fence.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise os_error(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL)
    os.set_blocking(fd, True)
    with open(fd, encoding="utf-8", errors="replace", newline="") as fh:
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

    def __init__(self, path: str, fence: Confinement = UNCONFINED) -> None:
        self.path = path
        self._pin: Pin | None = None
        self._created: list[str] = []
        if fence.enabled:
            # Confined: the walk resolves a symlinked target and makes the missing parents; the
            # temporary file and the rename go through the directory it holds open.
            self._pin = fence.pin(path, create_parents=True)
            self.target = self._pin.path
            parent = os.path.dirname(self.target)
        else:
            self.target = os.path.realpath(path) if os.path.islink(path) else path
            parent = os.path.dirname(self.target) or "."
        try:
            if os.path.isdir(self.target):
                raise os_error(errno.EISDIR)
            if self._pin is None:
                self._created = make_dirs(parent)
            fd, self._tmp = tempfile.mkstemp(dir=parent, prefix="." + os.path.basename(self.target)[:32] + ".")
        except BaseException:
            self._undo_dirs()
            raise
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self.size = 0

    def _undo_dirs(self) -> None:
        remove_dirs(self._created)
        self._created = []
        if self._pin is not None:
            self._pin.undo_created()
            self._pin.close()
            self._pin = None

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
        if self._pin is not None:
            self._pin.close()
            self._pin = None
        return self.size

    def abort(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
        self._undo_dirs()


def write_bytes(path: str, data: bytes, fence: Confinement = UNCONFINED) -> int:
    writer = AtomicWriter(path, fence)
    try:
        writer.write(data)
    except BaseException:
        writer.abort()
        raise
    return writer.commit()


# ---- changing entries ------------------------------------------------------------------------
def delete_entry(path: str, recursive: bool, fence: Confinement = UNCONFINED) -> None:
    """A file or symlink is unlinked; a directory removed if empty, or with everything in it."""
    try:
        with fence.pin(path, follow=False) as pin:
            if pin.name == ".":
                raise InvalidRequest(f"cannot delete a filesystem root: {path}")
            st = os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if recursive:
                    shutil.rmtree(pin.name, dir_fd=pin.dir_fd)
                else:
                    os.rmdir(pin.name, dir_fd=pin.dir_fd)
            else:
                os.unlink(pin.name, dir_fd=pin.dir_fd)
    except OSError as exc:
        raise fs_error(exc, path) from exc


def mkdir(path: str, fence: Confinement = UNCONFINED) -> None:
    try:
        if not fence.enabled:
            os.makedirs(path, exist_ok=True)
            return
        with fence.pin(path, create_parents=True) as pin:
            try:
                os.mkdir(pin.name, dir_fd=pin.dir_fd)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=False).st_mode):
                    raise
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


def move_entry(source: str, dest: str, overwrite: bool, fence: Confinement = UNCONFINED) -> None:
    """Rename ``source`` to ``dest`` (no copy across filesystems). An existing ``dest`` is replaced
    only with ``overwrite``; it is moved aside first and restored if the rename fails. Confined,
    both go through the directories a walk from the root holds open."""
    if not fence.enabled:
        _move(source, dest, overwrite, source, dest)
        return
    try:
        with fence.pin(source, follow=False) as src, fence.pin(dest, follow=False, create_parents=True) as dst:
            if "." in (src.name, dst.name):
                raise InvalidRequest(f"cannot move a filesystem root: {source if src.name == '.' else dest}")
            try:
                _move(src.path, dst.path, overwrite, source, dest)
            except BaseException:
                dst.undo_created()
                raise
    except OSError as exc:
        raise fs_error(exc, source if exc.errno == errno.ENOENT else dest) from exc


def _move(source: str, dest: str, overwrite: bool, source_name: str, dest_name: str) -> None:
    """``move_entry`` on the paths to use; errors name the paths the client gave."""
    if not os.path.lexists(source):
        raise InvalidRequest(f"path not found: {source_name}")
    aside = None
    if os.path.lexists(dest):
        if not overwrite:
            raise InvalidRequest(f"destination already exists: {dest_name}")
        if os.path.samestat(os.lstat(source), os.lstat(dest)):
            return  # already there
        aside = _aside_name(dest)
        try:
            os.rename(dest, aside)
        except OSError as exc:
            raise fs_error(exc, dest_name) from exc
    created: list[str] = []
    try:
        created = make_dirs(os.path.dirname(dest))
        os.rename(source, dest)
    except OSError as exc:
        remove_dirs(created)
        if aside is not None:
            with contextlib.suppress(OSError):
                os.rename(aside, dest)
        raise fs_error(exc, source_name if exc.errno == errno.ENOENT else dest_name) from exc
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
