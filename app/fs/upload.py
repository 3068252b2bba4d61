"""``upload-batch``: a plain tar unpacked into a destination directory, all or nothing.

The body is spooled to a hidden staging directory next to where the files will land (inside the
destination when it exists, else in its nearest existing ancestor, so the final renames stay on one
filesystem). Every entry is checked and unpacked there first; only a fully unpacked archive is moved
into place, by renames. Anything that fails (a bad archive, an escaping entry, a conflict, a body
over the limit) undoes the renames done so far and removes the staging directory, so the
destination is left as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from app.errors import InvalidRequest, StreamError

from .ops import UMASK, make_dirs, remove_dirs
from .paths import Confinement, clean_relative, is_within, os_error

if TYPE_CHECKING:
    import tarfile

# Legacy: only the first 1024 unpacked paths are listed, then `truncated: true`.
MAX_LISTED_PATHS = 1024
# Default cap on the bytes an archive unpacks to (sparse members declare far more than they carry).
UNPACKED_LIMIT = 1024 * 1024 * 1024


def _existing_anchor(dest: str) -> str:
    """The directory the staging area goes in. Refuses a destination that is (or lies under) a file."""
    if os.path.isdir(dest):
        return dest
    if os.path.lexists(dest):
        raise os_error(errno.EEXIST)
    current = os.path.dirname(dest)
    while not os.path.isdir(current):
        if os.path.lexists(current):
            raise os_error(errno.ENOTDIR)
        current = os.path.dirname(current)
    return current


def remove_tree(path: str) -> None:
    """rmtree that also gets through read-only directories inside ``path`` (unpacked archives may
    have them). Nothing outside ``path`` is ever touched."""
    if not os.path.lexists(path):
        return

    def make_writable(function: Any, failed: str, exc_info: Any) -> None:
        parent = os.path.dirname(failed)
        if isinstance(exc_info[1], FileNotFoundError) or not is_within(parent, path):
            return
        with contextlib.suppress(OSError):
            os.chmod(parent, 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                remove_tree(failed)
            else:
                os.unlink(failed)

    shutil.rmtree(path, onerror=make_writable)


def _link_escapes(name: str, target: str) -> bool:
    """A symlink at ``name`` (relative to the destination) pointing at ``target`` leaves it."""
    if target.startswith("/"):
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    return resolved == ".." or resolved.startswith("../")


def _inside(path: str, top: str) -> bool:
    return os.path.commonpath([path, top]) == top


def stdlib_filter_available() -> bool:
    """Python 3.11.4+ has tarfile's extraction filters; Debian 12's own 3.11.2 does not."""
    import tarfile

    return hasattr(tarfile, "data_filter")


def data_filter(member: tarfile.TarInfo, tree: str) -> tarfile.TarInfo:
    """What tarfile's "data" filter does, for a Python without it, applied to a member whose name
    ``_checked_name`` has already cleaned, right before it is unpacked into ``tree`` (so earlier
    members are on disk and a symlink they made is followed): the entry and its link target must
    resolve inside the tree; owners are dropped (the unpacking user owns everything); modes lose
    setuid/setgid/sticky and group/other write bits, files stay owner-readable and -writable, and
    directories get the default mode."""
    top = os.path.realpath(tree)
    if not _inside(os.path.realpath(os.path.join(top, member.name)), top):
        raise InvalidRequest(f"tar entry escapes destination: {member.name}")
    if member.issym() or member.islnk():
        base = os.path.dirname(member.name) if member.issym() else ""
        if not _inside(os.path.realpath(os.path.join(top, base, member.linkname)), top):
            raise InvalidRequest(f"tar entry escapes destination: {member.name}")
    if member.isdir():
        member.mode = 0o777 & ~UMASK
    elif member.isfile() or member.islnk():
        mode = member.mode & 0o755
        if not mode & 0o100:
            mode &= ~0o111
        member.mode = mode | 0o600
    # Without a filter, tarfile running as root gives each entry the owner the archive names:
    # the unpacking user instead (extracted with numeric_owner=True).
    member.uid, member.gid, member.uname, member.gname = os.geteuid(), os.getegid(), "", ""
    return member


def _escaping_symlink(top: str) -> str | None:
    """The first symlink under ``top`` that resolves outside it (one whose target an entry unpacked
    after it redirected), as a path relative to ``top``."""
    real_top = os.path.realpath(top)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path) and not _inside(os.path.realpath(path), real_top):
                return os.path.relpath(path, top)
    return None


def _tree_bytes(top: str) -> int:
    """Bytes of the regular files under ``top``, as the file system reports them."""
    total = 0
    for folder, _dirs, files in os.walk(top):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(os.path.join(folder, name))
                total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


class TarUpload:
    def __init__(self, dest: str, unpacked_limit: int = UNPACKED_LIMIT, fence: Confinement | None = None) -> None:
        self.dest = dest  # as the client named it (the listed paths start with it)
        self.unpacked_limit = unpacked_limit
        self._committed = False
        # Confined: everything happens through the directory a walk from the root holds open
        # (missing parents of the destination made by the walk, and removed again on failure).
        self._pin = fence.pin(dest, create_parents=True) if fence is not None and fence.enabled else None
        self.real = self._pin.path if self._pin is not None else dest
        try:
            anchor = _existing_anchor(self.real)
            self.staging = tempfile.mkdtemp(prefix=".upload-", dir=anchor)
        except BaseException:
            self._release()
            raise
        self.tree = os.path.join(self.staging, "tree")
        self._archive_path = os.path.join(self.staging, "archive.tar")
        try:
            os.mkdir(self.tree)
            self._archive: BinaryIO | None = open(self._archive_path, "wb")  # closed in finish/abort
        except OSError:
            remove_tree(self.staging)
            self._release()
            raise
        self.size = 0

    def write(self, data: bytes) -> None:
        assert self._archive is not None
        self._archive.write(data)
        self.size += len(data)

    def abort(self) -> None:
        if self._archive is not None:
            with contextlib.suppress(OSError):
                self._archive.close()
            self._archive = None
        remove_tree(self.staging)
        self._release()

    def _release(self) -> None:
        if self._pin is not None:
            if not self._committed:
                self._pin.undo_created()
            self._pin.close()
            self._pin = None

    def finish(self) -> dict[str, Any]:
        """Unpack, move into place, clean up. Blocking: run in a worker thread."""
        try:
            assert self._archive is not None
            self._archive.close()
            self._archive = None
            paths, total = self._unpack()
            self._commit()
            self._committed = True
            return {"paths": paths, "truncated": total > MAX_LISTED_PATHS}
        finally:
            self.abort()

    # ---- unpacking into the staging tree ------------------------------------------------------
    def _unpack(self) -> tuple[list[str], int]:
        import tarfile  # here: an idle server does not hold it (0.4 MB)

        paths: list[str] = []
        total = 0
        declared = 0
        if os.path.getsize(self._archive_path) == 0:
            return paths, total  # an empty body is an empty archive

        own_filter = not stdlib_filter_available()

        def checked(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
            nonlocal total, declared
            for member in tar:
                name = self._checked_name(member)
                if name is None:
                    continue
                if member.isfile():
                    # A member's size is what it unpacks to: for a sparse one, its full length.
                    declared += member.size
                    if declared > self.unpacked_limit:
                        raise InvalidRequest(
                            f"tar archive unpacks to more than {self.unpacked_limit} bytes: {member.name}"
                        )
                total += 1
                if len(paths) < MAX_LISTED_PATHS:
                    paths.append(os.path.join(self.dest, *name.split("/")))
                yield data_filter(member, self.tree) if own_filter else member

        try:
            # "r:": plain tar only; legacy did not decode gzip either. The "data" filter drops
            # setuid bits, owners and directory modes, and refuses links that leave the tree;
            # where the stdlib has none, `data_filter` does the same.
            with tarfile.open(self._archive_path, mode="r:") as tar:
                if own_filter:
                    # What a Python without filters does (and says so, where it has them).
                    trusted: dict[str, Any] = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
                    tar.extractall(self.tree, members=checked(tar), numeric_owner=True, **trusted)
                else:
                    tar.extractall(self.tree, members=checked(tar), filter="data")
        except tarfile.TarError as exc:
            if own_filter or not isinstance(exc, tarfile.FilterError):
                raise StreamError(f"invalid tar archive: {exc}") from exc
            raise InvalidRequest(f"tar entry escapes destination: {exc.tarinfo.name}") from exc
        # A symlink checked when it was unpacked may lead out through one unpacked after it.
        escaping = _escaping_symlink(self.tree)
        if escaping is not None:
            raise InvalidRequest(f"tar entry escapes destination: {escaping}")
        # What was really written, whatever the headers said.
        if _tree_bytes(self.tree) > self.unpacked_limit:
            raise InvalidRequest(f"tar archive unpacks to more than {self.unpacked_limit} bytes")
        return paths, total

    def _checked_name(self, member: tarfile.TarInfo) -> str | None:
        """The cleaned entry name (None: skip the entry). Refuses what could leave the destination."""
        original = member.name
        parts = clean_relative(original)
        if parts is None:
            raise InvalidRequest(f"invalid relative path: {original}")
        if not parts:
            return None
        name = "/".join(parts)
        if member.issym():
            if _link_escapes(name, member.linkname):
                raise InvalidRequest(f"tar entry escapes destination: {original}")
        elif member.islnk():
            target = clean_relative(member.linkname)
            if not target:
                raise InvalidRequest(f"tar entry escapes destination: {original}")
            member.linkname = "/".join(target)
        elif not (member.isfile() or member.isdir()):
            raise InvalidRequest(f"unsupported tar entry type: {original}")
        member.name = name
        return name

    # ---- moving the tree into place ---------------------------------------------------------
    def _commit(self) -> None:
        if not os.path.isdir(self.real):
            created = make_dirs(os.path.dirname(self.real))
            try:
                os.rename(self.tree, self.real)
            except BaseException:
                remove_dirs(created)
                raise
            return
        os.mkdir(os.path.join(self.staging, "replaced"))
        # (where it was, where it is now) for every rename, so they can be undone in reverse.
        journal: list[tuple[str, str]] = []
        try:
            self._merge(self.tree, self.real, journal)
        except BaseException:
            self._rollback(journal)
            raise

    def _merge(self, src: str, dst: str, journal: list[tuple[str, str]]) -> None:
        for name in os.listdir(src):
            staged, target = os.path.join(src, name), os.path.join(dst, name)
            staged_dir = os.path.isdir(staged) and not os.path.islink(staged)
            if not os.path.lexists(target):
                os.rename(staged, target)
                journal.append((staged, target))
                continue
            if staged_dir:
                if not os.path.isdir(target):
                    raise os_error(errno.EEXIST)
                if os.path.islink(target) and not is_within(os.path.realpath(target), os.path.realpath(self.real)):
                    relative = os.path.relpath(target, self.real)
                    raise InvalidRequest(f"tar entry escapes destination: {relative}")
                self._merge(staged, target, journal)
                continue
            if os.path.isdir(target) and not os.path.islink(target):
                raise os_error(errno.EISDIR)
            backup = os.path.join(self.staging, "replaced", str(len(journal)))
            os.rename(target, backup)
            journal.append((target, backup))
            os.rename(staged, target)
            journal.append((staged, target))

    @staticmethod
    def _rollback(journal: list[tuple[str, str]]) -> None:
        for was, now in reversed(journal):
            with contextlib.suppress(OSError):
                os.rename(now, was)
