"""--fs-root without races: every operation reaches its path by a walk from the root's descriptor,
so a directory swapped for a symlink after the check still cannot lead out of the root."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.errors import InvalidRequest, PermissionDenied
from app.fs import ops
from app.fs.paths import Confinement
from app.fs.upload import TarUpload


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Confinement]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside")
    outside.mkdir()
    (outside / "f.txt").write_text("secret")
    (outside / "victim").mkdir()
    return root, outside, Confinement([str(root)])


def swap_for_link(directory: Path, target: Path) -> None:
    """What a local process does between the check and the operation."""
    os.rename(directory, directory.with_name(directory.name + ".moved"))
    directory.symlink_to(target)


def tar_of(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def upload(path: str, fence: Confinement) -> Any:
    job = TarUpload(path, fence=fence)
    job.write(tar_of("new.txt", b"x"))
    return job.finish()


OPERATIONS: dict[str, Callable[[str, Confinement], Any]] = {
    "list": lambda p, f: ops.list_entries(p, f),
    "stat": lambda p, f: ops.stat_path(os.path.join(p, "f.txt"), f),
    "read": lambda p, f: ops.open_file(os.path.join(p, "f.txt"), f)[0].read(),
    "read_text": lambda p, f: ops.read_text(os.path.join(p, "f.txt"), fence=f),
    "attachment": lambda p, f: ops.read_regular(f, os.path.join(p, "f.txt"), 1000),
    "write": lambda p, f: ops.write_bytes(os.path.join(p, "f.txt"), b"pwned", f),
    "write_new_dirs": lambda p, f: ops.write_bytes(os.path.join(p, "a", "b", "new.txt"), b"pwned", f),
    "delete": lambda p, f: ops.delete_entry(os.path.join(p, "f.txt"), False, f),
    "delete_tree": lambda p, f: ops.delete_entry(os.path.join(p, "victim"), True, f),
    "mkdir": lambda p, f: ops.mkdir(os.path.join(p, "made", "deep"), f),
    "move_out": lambda p, f: ops.move_entry(os.path.join(p, "f.txt"), os.path.join(p, "moved.txt"), True, f),
    "upload": lambda p, f: upload(p, f),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_directory_swapped_for_an_outside_link_after_the_check_is_refused(
    tree: tuple[Path, Path, Confinement], name: str
) -> None:
    root, outside, fence = tree
    before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    path = str(root / "sub")
    fence.check(os.path.join(path, "f.txt"))  # the check passes...
    swap_for_link(root / "sub", outside)  # ...then `sub` becomes a link out of the root
    with pytest.raises(PermissionDenied):
        OPERATIONS[name](path, fence)
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == before
    assert (outside / "f.txt").read_text() == "secret"


def test_links_inside_the_root_still_work(tree: tuple[Path, Path, Confinement]) -> None:
    root, _outside, fence = tree
    (root / "rel").symlink_to("sub")
    (root / "abs").symlink_to(root / "sub" / "f.txt")
    (root / "chain").symlink_to("rel/../abs")
    assert ops.open_file(str(root / "rel" / "f.txt"), fence)[0].read() == b"inside"
    assert ops.read_text(str(root / "abs"), fence=fence) == "inside"
    assert ops.read_text(str(root / "chain"), fence=fence) == "inside"
    assert ops.stat_path(str(root / "rel"), fence)["entryType"] == "directory"
    ops.write_bytes(str(root / "abs"), b"through the link", fence)  # written through, as unconfined
    assert (root / "sub" / "f.txt").read_text() == "through the link"
    assert (root / "abs").is_symlink()
    ops.delete_entry(str(root / "rel"), False, fence)  # the link itself
    assert (root / "sub").is_dir()


def test_dot_dot_cannot_climb_out(tree: tuple[Path, Path, Confinement]) -> None:
    root, _outside, fence = tree
    (root / "up").symlink_to("../outside")
    with pytest.raises(PermissionDenied):
        ops.read_text(str(root / "up" / "f.txt"), fence=fence)
    with pytest.raises(PermissionDenied):
        ops.list_entries(str(root / "sub" / ".." / ".." / "outside"), fence)


def test_a_failed_confined_write_removes_the_directories_it_made(tree: tuple[Path, Path, Confinement]) -> None:
    root, _outside, fence = tree
    writer = ops.AtomicWriter(str(root / "n1" / "n2" / "x.txt"), fence)
    writer.write(b"partial")
    writer.abort()
    assert not (root / "n1").exists()


def test_root_itself_cannot_be_deleted_or_moved(tree: tuple[Path, Path, Confinement]) -> None:
    root, _outside, fence = tree
    with pytest.raises(InvalidRequest):
        ops.delete_entry(str(root), True, fence)
    with pytest.raises(InvalidRequest):
        ops.move_entry(str(root), str(root / "sub" / "r"), False, fence)
    assert (root / "sub" / "f.txt").exists()


def test_a_fifo_is_refused_without_blocking(tree: tuple[Path, Path, Confinement]) -> None:
    root, _outside, fence = tree
    os.mkfifo(root / "pipe")
    with pytest.raises(InvalidRequest):
        ops.open_file(str(root / "pipe"), fence)
    with pytest.raises(OSError):
        ops.read_text(str(root / "pipe"), fence=fence)


def test_a_link_swapped_onto_an_upload_in_progress_is_not_followed_out(
    tree: tuple[Path, Path, Confinement],
) -> None:
    root, outside, fence = tree
    job = TarUpload(str(root / "fresh"), fence=fence)  # not there yet: made at the commit
    job.write(tar_of("f.txt", b"pwned"))
    (root / "fresh").symlink_to(outside)  # while the body arrives
    with pytest.raises(PermissionDenied):
        job.finish()
    assert (outside / "f.txt").read_text() == "secret"
    assert sorted(os.listdir(root)) == ["fresh", "sub"]  # no staging left


def test_a_link_swapped_in_for_a_file_being_written_is_replaced_not_followed(
    tree: tuple[Path, Path, Confinement],
) -> None:
    root, outside, fence = tree
    writer = ops.AtomicWriter(str(root / "sub" / "f.txt"), fence)
    writer.write(b"new")
    (root / "sub" / "f.txt").unlink()
    (root / "sub" / "f.txt").symlink_to(outside / "f.txt")
    writer.commit()
    assert (outside / "f.txt").read_text() == "secret"
    assert not (root / "sub" / "f.txt").is_symlink()
    assert (root / "sub" / "f.txt").read_text() == "new"


def test_a_member_under_an_earlier_link_member_is_checked_where_it_lands(tmp_path: Path) -> None:
    """``q -> .`` then ``q/l -> ../out``: by its name ``l`` stays inside, where it really lies it does not."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, target in (("q", "."), ("q/l", "../out")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    job = TarUpload(str(tmp_path / "dest"))
    job.write(buffer.getvalue())
    with pytest.raises(InvalidRequest, match="escapes destination: q/l"):
        job.finish()
    assert os.listdir(tmp_path) == []


def test_unpacking_keeps_file_modes_and_times_as_the_data_filter_does(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, mode in (("run.sh", 0o4777), ("plain.txt", 0o640), ("d", 0o500)):
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = mode, 1_000_000_000
            if name == "d":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
    job = TarUpload(str(tmp_path / "dest"))
    job.write(buffer.getvalue())
    job.finish()
    dest = tmp_path / "dest"
    assert stat.S_IMODE((dest / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "plain.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((dest / "d").stat().st_mode) == 0o777 & ~ops.UMASK
    assert (dest / "run.sh").stat().st_mtime == (dest / "d").stat().st_mtime == 1_000_000_000


def test_without_roots_the_walk_starts_at_slash_and_follows_links_as_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("x")
    (tmp_path / "abs").symlink_to(tmp_path / "d")
    (tmp_path / "rel").symlink_to("d/../d")
    fence = Confinement([])
    up = "/.." * 3 + str(tmp_path)  # `..` at / stays at /
    assert ops.read_text(f"{up}/abs/f.txt", fence=fence) == "x"
    assert ops.stat_path(str(tmp_path / "rel"), fence)["entryType"] == "directory"
    ops.write_bytes(str(tmp_path / "abs" / "n" / "g.txt"), b"g", fence)
    assert (tmp_path / "d" / "n" / "g.txt").read_bytes() == b"g"
