"""--fs-root without races: every operation reaches its path by a walk from the root's descriptor,
so a directory swapped for a symlink after the check still cannot lead out of the root."""

from __future__ import annotations

import io
import os
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
