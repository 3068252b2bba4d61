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
from typing import Any, BinaryIO

from app.errors import InvalidRequest

from .beneath import READ_DIR_FLAGS, Walk
from .paths import NOFOLLOW, Confinement, fs_error, os_error, rfc3339
from .temps import remove_entry, temp_name

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
            if not stat.S_ISDIR(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=False).st_mode):
                raise InvalidRequest(f"path is not a directory: {path}")
            fd = os.open(pin.name, READ_DIR_FLAGS, dir_fd=pin.dir_fd)
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
    """FsStat, following symlinks (the walk resolves them)."""
    try:
        with fence.pin(path) as pin:
            return {"path": path, **_info(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=False))}
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
def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class AtomicWriter:
    """Write a file all-or-nothing: bytes go to a hidden temporary file in the target's directory
    (recorded in the fence's ``temps``, so that a crash leaves nothing for good), which replaces
    the target only on ``commit``. Missing parents are created (and removed again on ``abort``). A
    symlinked target is written through, as a plain write would. Everything happens in the
    directory the walk holds open: a name swapped for a link meanwhile is replaced, not followed."""

    def __init__(self, path: str, fence: Confinement = UNCONFINED) -> None:
        self.path = path
        self._temps = fence.temps
        self._token: str | None = None
        self._pin: Walk | None = fence.pin(path, create_parents=True)
        self.dir_fd, self.name = self._pin.dir_fd, self._pin.name
        self._tmp = temp_name(self.name)
        try:
            existing = _lstat_at(self.dir_fd, self.name)
            if self.name == "." or (existing is not None and stat.S_ISDIR(existing.st_mode)):
                raise os_error(errno.EISDIR)
            self._token = self._temps.add(self.dir_fd, self._tmp)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
            fd = os.open(self._tmp, flags, 0o600, dir_fd=self.dir_fd)
        except BaseException:
            self._temps.drop(self._token)
            self._release(undo=True)
            raise
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self.size = 0

    def _release(self, *, undo: bool) -> None:
        if self._pin is not None:
            if undo:
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
            existing = _lstat_at(self.dir_fd, self.name)
            fd = self._file.fileno()
            if existing is not None and stat.S_ISREG(existing.st_mode):  # keep its mode and owner
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(OSError):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
            else:
                os.fchmod(fd, 0o666 & ~UMASK)
            self._file.close()
            self._file = None
            os.replace(self._tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except BaseException:
            self.abort()
            raise
        self._temps.drop(self._token)
        self._release(undo=False)
        return self.size

    def abort(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if self._pin is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp, dir_fd=self.dir_fd)
            self._temps.drop(self._token)
        self._release(undo=True)


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
                    # rmtree with dir_fd works by descriptors and refuses a link swapped in.
                    shutil.rmtree(pin.name, dir_fd=pin.dir_fd)
                else:
                    os.rmdir(pin.name, dir_fd=pin.dir_fd)
            else:
                os.unlink(pin.name, dir_fd=pin.dir_fd)
    except OSError as exc:
        raise fs_error(exc, path) from exc


def mkdir(path: str, fence: Confinement = UNCONFINED) -> None:
    try:
        with fence.pin(path, create_parents=True) as pin:
            try:
                os.mkdir(pin.name, dir_fd=pin.dir_fd)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(pin.name, dir_fd=pin.dir_fd, follow_symlinks=False).st_mode):
                    raise
    except OSError as exc:
        raise fs_error(exc, path) from exc


def _aside_name(dir_fd: int, name: str) -> str:
    for n in itertools.count():
        candidate = f".{name[:32]}.replaced-{os.getpid()}-{n}"
        if _lstat_at(dir_fd, candidate) is None:
            return candidate
    raise AssertionError("unreachable")


def move_entry(source: str, dest: str, overwrite: bool, fence: Confinement = UNCONFINED) -> None:
    """Rename ``source`` to ``dest`` (no copy across filesystems). An existing ``dest`` is replaced
    only with ``overwrite``; it is moved aside first and restored if the rename fails. Both go
    through the directories a walk from the root holds open; links are moved, not followed."""
    try:
        with fence.pin(source, follow=False) as src, fence.pin(dest, follow=False, create_parents=True) as dst:
            if "." in (src.name, dst.name):
                raise InvalidRequest(f"cannot move a filesystem root: {source if src.name == '.' else dest}")
            try:
                _move(src, dst, overwrite, source, dest)
            except BaseException:
                dst.undo_created()
                raise
    except OSError as exc:
        raise fs_error(exc, source if exc.errno == errno.ENOENT else dest) from exc


def _move(src: Walk, dst: Walk, overwrite: bool, source_name: str, dest_name: str) -> None:
    """``move_entry`` on the pinned entries; errors name the paths the client gave."""
    source_st = _lstat_at(src.dir_fd, src.name)
    if source_st is None:
        raise InvalidRequest(f"path not found: {source_name}")
    aside = None
    dest_st = _lstat_at(dst.dir_fd, dst.name)
    if dest_st is not None:
        if not overwrite:
            raise InvalidRequest(f"destination already exists: {dest_name}")
        if os.path.samestat(source_st, dest_st):
            return  # already there
        aside = _aside_name(dst.dir_fd, dst.name)
        try:
            os.rename(dst.name, aside, src_dir_fd=dst.dir_fd, dst_dir_fd=dst.dir_fd)
        except OSError as exc:
            raise fs_error(exc, dest_name) from exc
    try:
        os.rename(src.name, dst.name, src_dir_fd=src.dir_fd, dst_dir_fd=dst.dir_fd)
    except OSError as exc:
        if aside is not None:
            with contextlib.suppress(OSError):
                os.rename(aside, dst.name, src_dir_fd=dst.dir_fd, dst_dir_fd=dst.dir_fd)
        raise fs_error(exc, source_name if exc.errno == errno.ENOENT else dest_name) from exc
    if aside is not None:
        remove_entry(dst.dir_fd, aside)


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
