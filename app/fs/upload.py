"""``upload-batch``: a plain tar unpacked into a destination directory, all or nothing.

The body is spooled to a hidden staging directory next to where the files will land (inside the
destination when it exists, else in its parent, so the final renames stay on one filesystem); it is
recorded in the fence's ``temps`` so that a crash leaves nothing for good. The members are read one
by one and each is made in the staging tree through descriptors (its parent opened relative to the
tree, no link followed out of it); only a fully unpacked archive is moved into place, by renames
between directories held open. Anything that fails (a bad archive, an escaping entry, a conflict, a
body over the limit) undoes the renames done so far and removes the staging directory, so the
destination is left as it was.

Nothing here resolves a path by name after the destination was walked: a link swapped in while the
body arrives is found by ``lstat`` at the commit and followed only by a new confined walk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from typing import IO, TYPE_CHECKING, Any

from app.errors import InvalidRequest, StreamError

from .beneath import DIR_FLAGS, READ_DIR_FLAGS, Escape, Walk, walk_at
from .ops import UNCONFINED
from .paths import NOFOLLOW, Confinement, clean_relative, os_error
from .temps import remove_entry, temp_name

if TYPE_CHECKING:
    import tarfile

# Legacy: only the first 1024 unpacked paths are listed, then `truncated: true`.
MAX_LISTED_PATHS = 1024
# Default cap on the bytes an archive unpacks to (sparse members declare far more than they carry).
UNPACKED_LIMIT = 1024 * 1024 * 1024
CHUNK = 1 << 20
# (directory, name) where an entry is now and where it was, for each rename of a commit.
Journal = list[tuple[int, str, int, str]]


def _link_escapes(name: str, target: str) -> bool:
    """A symlink at ``name`` (relative to the destination) pointing at ``target`` leaves it."""
    if target.startswith("/"):
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    return resolved == ".." or resolved.startswith("../")


def _file_mode(mode: int) -> int:
    """A member file's mode as tarfile's "data" filter makes it: no setuid/setgid/sticky, no write
    for group and others, executable only if the owner may execute, always owner read/write."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class TarUpload:
    def __init__(self, dest: str, unpacked_limit: int = UNPACKED_LIMIT, fence: Confinement | None = None) -> None:
        self.dest = dest  # as the client named it (the listed paths start with it)
        self.unpacked_limit = unpacked_limit
        self._fence = fence if fence is not None else UNCONFINED
        self._temps = self._fence.temps
        self._committed = False
        self._fds: list[int] = []  # every directory held open, closed at the end
        self._token: str | None = None
        self._staging_name = temp_name("upload")
        self._archive: IO[bytes] | None = None
        self.size = 0
        self._declared = 0  # bytes the members' headers say they unpack to
        self._written = 0  # bytes really written
        # The destination's directory and name; its missing parents are made by the walk (and
        # removed again on failure).
        self._pin: Walk | None = self._fence.pin(dest, create_parents=True)
        try:
            self._anchor = self._open_anchor(self._pin)
            self._token = self._temps.add(self._anchor, self._staging_name)
            os.mkdir(self._staging_name, 0o700, dir_fd=self._anchor)
            self._staging = self._hold(os.open(self._staging_name, DIR_FLAGS, dir_fd=self._anchor))
            os.mkdir("tree", dir_fd=self._staging)
            self._tree = self._hold(os.open("tree", DIR_FLAGS, dir_fd=self._staging))
            fd = os.open("archive.tar", os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600, dir_fd=self._staging)
            self._archive = os.fdopen(fd, "w+b")  # closed in finish/abort
        except BaseException:
            self.abort()
            raise

    def _hold(self, fd: int) -> int:
        self._fds.append(fd)
        return fd

    def _open_anchor(self, pin: Walk) -> int:
        """The directory the staging area goes in: the destination, or the directory it will be
        made in. Refuses a destination that is a file."""
        if pin.name == ".":
            return self._hold(os.dup(pin.dir_fd))
        st = _lstat_at(pin.dir_fd, pin.name)
        if st is None:
            return self._hold(os.dup(pin.dir_fd))
        if stat.S_ISDIR(st.st_mode):
            return self._hold(os.open(pin.name, DIR_FLAGS, dir_fd=pin.dir_fd))
        raise os_error(errno.EEXIST)

    def write(self, data: bytes) -> None:
        assert self._archive is not None
        self._archive.write(data)
        self.size += len(data)

    def abort(self) -> None:
        if self._archive is not None:
            with contextlib.suppress(OSError):
                self._archive.close()
            self._archive = None
        if self._fds:
            with contextlib.suppress(OSError):
                remove_entry(self._anchor, self._staging_name)
            self._temps.drop(self._token)
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds = []
        if self._pin is not None:
            if not self._committed:
                self._pin.undo_created()
            self._pin.close()
            self._pin = None

    def finish(self) -> dict[str, Any]:
        """Unpack, move into place, clean up. Blocking: run in a worker thread."""
        try:
            assert self._archive is not None
            self._archive.flush()
            paths, total = self._unpack(self._archive)
            self._commit()
            self._committed = True
            return {"paths": paths, "truncated": total > MAX_LISTED_PATHS}
        finally:
            self.abort()

    # ---- unpacking into the staging tree ------------------------------------------------------
    def _unpack(self, archive: IO[bytes]) -> tuple[list[str], int]:
        import tarfile  # here: an idle server does not hold it (0.4 MB)

        paths: list[str] = []
        total = 0
        if self.size == 0:
            return paths, total  # an empty body is an empty archive
        archive.seek(0)
        directories: list[tuple[list[str], float]] = []
        try:
            # "r:": plain tar only; legacy did not decode gzip either.
            with tarfile.open(fileobj=archive, mode="r:") as tar:
                for member in tar:
                    name = self._checked_name(member)
                    if name is None:
                        continue
                    total += 1
                    if len(paths) < MAX_LISTED_PATHS:
                        paths.append(os.path.join(self.dest, *name.split("/")))
                    self._extract(tar, member, name)
                    if member.isdir():
                        directories.append((name.split("/"), member.mtime))
        except tarfile.TarError as exc:
            raise StreamError(f"invalid tar archive: {exc}") from exc
        # A link checked when it was made can lead out once a later entry replaced what it goes
        # through ("x" -> "d/q/../.." then "d/q" -> ".."): every link is followed once more, beneath
        # the tree only, before anything is committed.
        escaping = self._escaping_link()
        if escaping is not None:
            raise InvalidRequest(f"tar entry escapes destination: {escaping}")
        # Last, as tarfile does: making the entries inside changed the directories' times.
        for parts, mtime in directories:
            with contextlib.suppress(OSError, Escape), walk_at(self._tree, parts, follow=False) as walk:
                ns = int(mtime * 1_000_000_000)
                os.utime(walk.name, ns=(ns, ns), dir_fd=walk.dir_fd, follow_symlinks=False)
        return paths, total

    def _escaping_link(self) -> str | None:
        """The first link of the staging tree that leads out of it, as a path relative to it."""
        for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=self._tree):
            for name in dirs + files:
                if not stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    continue
                parts = [p for p in os.path.join(folder, name).split("/") if p not in ("", ".")]
                try:
                    with walk_at(self._tree, parts, follow=True):
                        pass
                except Escape:
                    return "/".join(parts)
                except OSError:
                    pass  # a link to nothing inside: harmless
        return None

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
        if member.isfile():
            # A member's size is what it unpacks to: for a sparse one, its full length.
            self._declared += member.size
            if self._declared > self.unpacked_limit:
                raise InvalidRequest(f"tar archive unpacks to more than {self.unpacked_limit} bytes: {original}")
        return name

    def _extract(self, tar: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> None:
        """Make one member in the staging tree: its parent reached by a walk beneath the tree (links
        made by earlier members are followed only inside it), the entry made relative to it."""
        try:
            walk = walk_at(self._tree, name.split("/"), follow=False, create_parents=True)
        except Escape as exc:
            raise InvalidRequest(f"tar entry escapes destination: {member.name}") from exc
        with walk:
            parent, leaf = walk.dir_fd, walk.name
            existing = _lstat_at(parent, leaf)
            if member.isdir():
                if existing is not None and stat.S_ISDIR(existing.st_mode):
                    return
                if existing is not None:
                    os.unlink(leaf, dir_fd=parent)
                os.mkdir(leaf, 0o777, dir_fd=parent)  # the mode is the default, as the "data" filter has it
                return
            if existing is not None:
                if stat.S_ISDIR(existing.st_mode):
                    raise os_error(errno.EISDIR)
                os.unlink(leaf, dir_fd=parent)
            if member.issym():
                # Checked again where the link really lies (earlier members' links included).
                if _link_escapes("/".join([*walk.trail, leaf]), member.linkname):
                    raise InvalidRequest(f"tar entry escapes destination: {member.name}")
                os.symlink(member.linkname, leaf, dir_fd=parent)
            elif member.islnk():
                self._hard_link(member, parent, leaf)
            else:
                self._write_file(tar, member, parent, leaf)

    def _hard_link(self, member: tarfile.TarInfo, parent: int, leaf: str) -> None:
        try:
            source = walk_at(self._tree, member.linkname.split("/"), follow=False)
        except Escape as exc:
            raise InvalidRequest(f"tar entry escapes destination: {member.name}") from exc
        with source:
            st = _lstat_at(source.dir_fd, source.name)
            if st is None or not stat.S_ISREG(st.st_mode):
                raise InvalidRequest(f"tar entry links to no earlier file: {member.name}")
            os.link(source.name, leaf, src_dir_fd=source.dir_fd, dst_dir_fd=parent, follow_symlinks=False)

    def _write_file(self, tar: tarfile.TarFile, member: tarfile.TarInfo, parent: int, leaf: str) -> None:
        fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600, dir_fd=parent)
        with os.fdopen(fd, "wb") as out:
            source = tar.extractfile(member)
            if source is not None:
                while chunk := source.read(CHUNK):
                    # What is really written, whatever the headers said.
                    self._written += len(chunk)
                    if self._written > self.unpacked_limit:
                        raise InvalidRequest(f"tar archive unpacks to more than {self.unpacked_limit} bytes")
                    out.write(chunk)
            out.flush()
            os.fchmod(fd, _file_mode(member.mode))
            ns = int(member.mtime * 1_000_000_000)
            os.utime(fd, ns=(ns, ns))

    # ---- moving the tree into place ---------------------------------------------------------
    def _commit(self) -> None:
        assert self._pin is not None
        parent, name = self._pin.dir_fd, self._pin.name
        if name == ".":
            self._merge_root(self._anchor)
            return
        st = _lstat_at(parent, name)
        if st is None:
            os.rename("tree", name, src_dir_fd=self._staging, dst_dir_fd=parent)
        elif stat.S_ISDIR(st.st_mode):
            self._merge_root(self._hold(os.open(name, DIR_FLAGS, dir_fd=parent)))
        elif stat.S_ISLNK(st.st_mode):
            # Swapped in while the body arrived: followed only by a new walk inside the roots.
            with self._fence.pin(self.dest) as again:
                if again.name == ".":
                    self._merge_root(self._hold(os.dup(again.dir_fd)))
                elif _lstat_at(again.dir_fd, again.name) is None:
                    os.rename("tree", again.name, src_dir_fd=self._staging, dst_dir_fd=again.dir_fd)
                else:
                    self._merge_root(self._hold(os.open(again.name, DIR_FLAGS, dir_fd=again.dir_fd)))
        else:
            raise os_error(errno.EEXIST)

    def _merge_root(self, dest_fd: int) -> None:
        os.mkdir("replaced", 0o700, dir_fd=self._staging)
        self._replaced = self._hold(os.open("replaced", DIR_FLAGS, dir_fd=self._staging))
        journal: Journal = []
        try:
            self._merge(self._tree, dest_fd, dest_fd, [], journal)
        except BaseException:
            for now_fd, now, was_fd, was in reversed(journal):
                with contextlib.suppress(OSError):
                    os.rename(now, was, src_dir_fd=now_fd, dst_dir_fd=was_fd)
            raise

    def _merge(self, src: int, dst: int, dest_fd: int, rel: list[str], journal: Journal) -> None:
        listing = os.open(".", READ_DIR_FLAGS, dir_fd=src)
        try:
            names = os.listdir(listing)
        finally:
            os.close(listing)
        for name in names:
            staged = _lstat_at(src, name)
            if staged is None:
                continue
            target = _lstat_at(dst, name)
            if target is None:
                os.rename(name, name, src_dir_fd=src, dst_dir_fd=dst)
                journal.append((dst, name, src, name))
                continue
            if stat.S_ISDIR(staged.st_mode):
                sub_src = self._hold(os.open(name, DIR_FLAGS, dir_fd=src))
                if stat.S_ISDIR(target.st_mode):
                    sub_dst = self._hold(os.open(name, DIR_FLAGS, dir_fd=dst))
                elif stat.S_ISLNK(target.st_mode):
                    sub_dst = self._through_link(dest_fd, [*rel, name])
                else:
                    raise os_error(errno.EEXIST)
                self._merge(sub_src, sub_dst, dest_fd, [*rel, name], journal)
                continue
            if stat.S_ISDIR(target.st_mode):
                raise os_error(errno.EISDIR)
            backup = str(len(journal))
            os.rename(name, backup, src_dir_fd=dst, dst_dir_fd=self._replaced)
            journal.append((self._replaced, backup, dst, name))
            os.rename(name, name, src_dir_fd=src, dst_dir_fd=dst)
            journal.append((dst, name, src, name))

    def _through_link(self, dest_fd: int, parts: list[str]) -> int:
        """The directory a link in the destination leads to, if it stays inside the destination."""
        try:
            walk = walk_at(dest_fd, parts, follow=True)
        except Escape as exc:
            raise InvalidRequest(f"tar entry escapes destination: {'/'.join(parts)}") from exc
        with walk:
            if walk.name == ".":
                return self._hold(os.dup(walk.dir_fd))
            try:
                return self._hold(os.open(walk.name, DIR_FLAGS, dir_fd=walk.dir_fd))
            except (NotADirectoryError, FileNotFoundError) as exc:
                raise os_error(errno.EEXIST) from exc
