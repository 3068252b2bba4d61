"""app.fs: path rules, time format, confinement, atomic writes, moves and all-or-nothing tar uploads."""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
from pathlib import Path

import pytest

from app.errors import InvalidRequest, PermissionDenied, StreamError
from app.fs import ops
from app.fs import upload as upload_module
from app.fs.paths import Confinement, clean_relative, fs_error, resolve, rfc3339
from app.fs.upload import MAX_LISTED_PATHS, TarUpload


# ---- paths ---------------------------------------------------------------------------------------
def test_absolute_paths_are_used_as_given() -> None:
    assert resolve("/a/../b/./c", "/root") == "/a/../b/./c"


def test_relative_paths_join_the_root_without_dot_components() -> None:
    assert resolve("a/./b//c", "/root") == "/root/a/b/c"
    assert resolve("./x", "/root") == "/root/x"
    assert resolve("", "/root") == "/root"
    assert resolve(".", "/root") == "/root"


@pytest.mark.parametrize("path", ["..", "../x", "a/../b", "a/.."])
def test_dot_dot_is_an_invalid_relative_path(path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        resolve(path, "/root")
    assert info.value.message == f"invalid relative path: {path}"
    assert clean_relative(path) is None


def test_rfc3339_uses_plus_zero_offset_and_trims_fraction() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00+00:00"
    assert rfc3339(1_769_768_142_123_456_789) == "2026-01-30T10:15:42.123456789+00:00"
    assert rfc3339(1_769_768_142_120_000_000) == "2026-01-30T10:15:42.12+00:00"


def test_modified_matches_the_legacy_format(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    modified = ops.stat_path(str(tmp_path / "f"))["modified"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?\+00:00", modified)


def test_fs_errors_map_to_legacy_errors() -> None:
    assert (
        fs_error(FileNotFoundError(2, "No such file or directory"), "/x").detail
        == "invalid request: path not found: /x"
    )
    error = fs_error(OSError(39, "Directory not empty"), "/x")
    assert isinstance(error, StreamError)
    assert error.status == 502
    assert error.details == {"message": "Directory not empty (os error 39)"}


# ---- confinement -----------------------------------------------------------------------------------
def test_confinement_off_allows_everything() -> None:
    fence = Confinement([])
    assert not fence.enabled
    fence.check("/etc/passwd")


def test_confinement_refuses_outside_paths_and_escaping_symlinks(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inside.txt").write_text("x")
    (root / "escape").symlink_to(outside)
    (root / "loop-in").symlink_to(root / "inside.txt")
    fence = Confinement([str(root)])
    fence.check(str(root / "inside.txt"))
    fence.check(str(root / "not-yet" / "deep.txt"))
    fence.check(str(root / "loop-in"))
    for bad in (str(outside / "f"), str(root / "escape"), str(root / "escape" / "f"), str(root / ".." / "outside")):
        with pytest.raises(PermissionDenied):
            fence.check(bad)
    # the link itself lies inside the root: deleting or moving it is allowed
    fence.check(str(root / "escape"), follow=False)
    with pytest.raises(PermissionDenied):
        fence.check(str(root / "escape" / "f"), follow=False)


# ---- listing and reading -------------------------------------------------------------------------
def test_entries_use_the_entry_metadata_and_stat_follows(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_bytes(b"12345")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    entries = {e["name"]: e for e in ops.list_entries(str(tmp_path))}
    assert set(entries) == {"d", "f", "link"}
    assert entries["d"]["entryType"] == "directory"
    assert entries["f"] == {
        "name": "f",
        "path": str(tmp_path / "f"),
        "entryType": "file",
        "size": 5,
        "modified": entries["f"]["modified"],
    }
    assert entries["link"]["entryType"] == "file"
    assert ops.stat_path(str(tmp_path / "link"))["entryType"] == "directory"
    with pytest.raises(InvalidRequest, match="path is not a directory"):
        ops.list_entries(str(tmp_path / "f"))


def test_open_file_refuses_directories_and_fifos(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    for path in (tmp_path, tmp_path / "pipe"):
        with pytest.raises(InvalidRequest, match="path is not a file"):
            ops.open_file(str(path))


def test_read_text_lines_are_one_based(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("one\ntwo\r\nthree\nfour")
    assert ops.read_text(str(path)) == "one\ntwo\r\nthree\nfour"
    assert ops.read_text(str(path), line=2, limit=2) == "two\r\nthree\n"
    assert ops.read_text(str(path), line=3) == "three\nfour"
    assert ops.read_text(str(path), limit=1) == "one\n"
    assert ops.read_text(str(path), line=10) == ""


# ---- atomic writes ---------------------------------------------------------------------------------
def test_atomic_write_creates_parents_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c.bin"
    assert ops.write_bytes(str(target), bytes(range(256))) == 256
    assert target.read_bytes() == bytes(range(256))
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~ops.UMASK
    target.chmod(0o751)
    ops.write_bytes(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(os.listdir(target.parent)) == ["c.bin"]


def test_atomic_write_goes_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    ops.write_bytes(str(tmp_path / "link.txt"), b"new")
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new"


def test_aborted_write_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("original")
    writer = ops.AtomicWriter(str(tmp_path / "keep.txt"))
    writer.write(b"partial")
    writer.abort()
    assert (tmp_path / "keep.txt").read_text() == "original"
    writer = ops.AtomicWriter(str(tmp_path / "new" / "deeper" / "x"))
    writer.write(b"partial")
    writer.abort()
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]


def test_writing_a_directory_fails(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        ops.write_bytes(str(tmp_path), b"x")


# ---- delete, mkdir, move ---------------------------------------------------------------------------
def test_delete_mkdir_and_their_errors(tmp_path: Path) -> None:
    ops.mkdir(str(tmp_path / "a" / "b"))
    ops.mkdir(str(tmp_path / "a" / "b"))  # existing directory: fine
    (tmp_path / "a" / "b" / "f").write_text("x")
    with pytest.raises(StreamError, match="Directory not empty"):
        ops.delete_entry(str(tmp_path / "a"), recursive=False)
    with pytest.raises(StreamError, match="File exists"):
        ops.mkdir(str(tmp_path / "a" / "b" / "f"))
    ops.delete_entry(str(tmp_path / "a"), recursive=True)
    assert not (tmp_path / "a").exists()
    with pytest.raises(InvalidRequest, match="path not found"):
        ops.delete_entry(str(tmp_path / "a"), recursive=True)


def test_delete_removes_a_symlink_not_its_target(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    ops.delete_entry(str(tmp_path / "link"), recursive=True)
    assert (tmp_path / "d" / "f").exists()
    assert not (tmp_path / "link").is_symlink()


def test_move_rules(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    with pytest.raises(InvalidRequest, match=f"destination already exists: {tmp_path / 'b.txt'}"):
        ops.move_entry(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), overwrite=False)
    with pytest.raises(InvalidRequest, match=f"path not found: {tmp_path / 'zz'}"):
        ops.move_entry(str(tmp_path / "zz"), str(tmp_path / "b.txt"), overwrite=True)
    ops.move_entry(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), overwrite=True)
    assert (tmp_path / "b.txt").read_text() == "a"
    # into missing parents, and over a whole directory
    ops.move_entry(str(tmp_path / "b.txt"), str(tmp_path / "x" / "y" / "b.txt"), overwrite=False)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "old").write_text("old")
    ops.move_entry(str(tmp_path / "x"), str(tmp_path / "dir"), overwrite=True)
    assert (tmp_path / "dir" / "y" / "b.txt").read_text() == "a"
    assert sorted(os.listdir(tmp_path)) == ["dir"]


def test_failed_move_restores_the_destination(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep").write_text("keep")
    (tmp_path / "d" / "sub").mkdir()
    # renaming a directory into its own subdirectory fails (EINVAL) after `to` was moved aside
    with pytest.raises(StreamError):
        ops.move_entry(str(tmp_path / "d"), str(tmp_path / "d" / "sub"), overwrite=True)
    assert (tmp_path / "d" / "keep").read_text() == "keep"
    assert (tmp_path / "d" / "sub").is_dir()
    assert sorted(os.listdir(tmp_path / "d")) == ["keep", "sub"]


# ---- tar uploads -----------------------------------------------------------------------------------
def make_tar(entries: list[tuple[str, bytes | None]], *, links: dict[str, tuple[bytes, str]] | None = None) -> bytes:
    """A plain tar: (name, data) files, (name, None) directories, links: name -> (type, target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        for name, (kind, target) in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


# Every tar test runs with the stdlib's "data" filter (Python 3.11.4+) and with the bridge's own,
# which a Python without it (Debian 12's 3.11.2) uses.
def _filters() -> list[str]:
    available = getattr(upload_module, "stdlib_filter_available", None)
    if available is None:
        return ["as built"]  # an unpacker that does not use tarfile's filters
    return ["stdlib filter", "own filter"] if available() else ["own filter"]


@pytest.fixture(params=_filters())
def tar_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "own filter":
        monkeypatch.setattr(upload_module, "stdlib_filter_available", lambda: False)
    return str(request.param)


def upload(dest: Path, data: bytes) -> dict[str, object]:
    job = TarUpload(str(dest))
    job.write(data)
    return job.finish()


def tree(path: Path) -> dict[str, str]:
    out = {}
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        out[rel] = "<dir>" if p.is_dir() and not p.is_symlink() else (p.read_text() if p.is_file() else "<link>")
    return out


@pytest.mark.usefixtures("tar_filter")
def test_upload_lists_paths_in_archive_order(tmp_path: Path) -> None:
    dest = tmp_path / "new" / "dest"
    data = make_tar([("./", None), ("a.txt", b"A"), ("nested/", None), ("nested/b.txt", b"B"), ("./c.txt", b"C")])
    result = upload(dest, data)
    assert result == {
        "paths": [str(dest / "a.txt"), str(dest / "nested"), str(dest / "nested" / "b.txt"), str(dest / "c.txt")],
        "truncated": False,
    }
    assert tree(dest) == {"a.txt": "A", "c.txt": "C", "nested": "<dir>", "nested/b.txt": "B"}
    assert sorted(os.listdir(tmp_path / "new")) == ["dest"]  # no staging left


@pytest.mark.usefixtures("tar_filter")
def test_upload_merges_into_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("keep")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "b.txt").write_text("old")
    upload(tmp_path, make_tar([("nested/b.txt", b"new"), ("nested/c.txt", b"C")]))
    assert tree(tmp_path) == {"keep.txt": "keep", "nested": "<dir>", "nested/b.txt": "new", "nested/c.txt": "C"}


@pytest.mark.usefixtures("tar_filter")
def test_upload_caps_the_listing(tmp_path: Path) -> None:
    result = upload(tmp_path / "many", make_tar([(f"f{i:04d}", b"") for i in range(1030)]))
    assert len(result["paths"]) == MAX_LISTED_PATHS  # type: ignore[arg-type]
    assert result["truncated"] is True
    assert len(os.listdir(tmp_path / "many")) == 1030


@pytest.mark.usefixtures("tar_filter")
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../evil.txt", "invalid relative path: ../evil.txt"),
        ("a/../../evil.txt", "invalid relative path: a/../../evil.txt"),
        ("/abs/evil.txt", "invalid relative path: /abs/evil.txt"),
    ],
)
def test_escaping_entries_are_refused_and_nothing_is_left(tmp_path: Path, name: str, message: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("keep")
    with pytest.raises(InvalidRequest) as info:
        upload(dest, make_tar([("first.txt", b"1"), (name, b"x"), ("last.txt", b"2")]))
    assert info.value.message == message
    assert tree(tmp_path) == {"dest": "<dir>", "dest/keep.txt": "keep"}


@pytest.mark.usefixtures("tar_filter")
@pytest.mark.parametrize(
    ("kind", "target"),
    [
        (tarfile.SYMTYPE, "../outside"),
        (tarfile.SYMTYPE, "/etc"),
        (tarfile.LNKTYPE, "../x"),
        (tarfile.LNKTYPE, "/etc/passwd"),
    ],
)
def test_links_leaving_the_destination_are_refused(tmp_path: Path, kind: bytes, target: str) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(InvalidRequest, match="tar entry escapes destination: link"):
        upload(dest, make_tar([("a.txt", b"a")], links={"link": (kind, target)}))
    assert os.listdir(tmp_path) == []


@pytest.mark.usefixtures("tar_filter")
def test_links_inside_the_destination_are_kept(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    upload(
        dest,
        make_tar([("d/", None), ("d/f", b"F")], links={"s": (tarfile.SYMTYPE, "d/f"), "h": (tarfile.LNKTYPE, "d/f")}),
    )
    assert os.readlink(dest / "s") == "d/f"
    assert (dest / "h").read_text() == "F"
    assert os.path.samefile(dest / "h", dest / "d" / "f")


@pytest.mark.usefixtures("tar_filter")
def test_a_symlinked_directory_leaving_the_destination_is_not_written_through(tmp_path: Path) -> None:
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "a.txt").write_text("old")
    (dest / "out").symlink_to(outside)
    with pytest.raises(InvalidRequest, match="tar entry escapes destination: out"):
        upload(dest, make_tar([("a.txt", b"new"), ("out/", None), ("out/evil", b"x")]))
    assert os.listdir(outside) == []
    assert (dest / "a.txt").read_text() == "old"  # rolled back
    assert sorted(os.listdir(dest)) == ["a.txt", "out"]


@pytest.mark.usefixtures("tar_filter")
def test_a_conflict_rolls_back_what_was_moved(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old")
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "inner").write_text("inner")
    with pytest.raises(IsADirectoryError):
        upload(tmp_path, make_tar([("a.txt", b"new"), ("b.txt", b"b"), ("z", b"file over a directory")]))
    assert tree(tmp_path) == {"a.txt": "old", "z": "<dir>", "z/inner": "inner"}


@pytest.mark.usefixtures("tar_filter")
def test_bad_archives_fail_without_a_trace(tmp_path: Path) -> None:
    import gzip

    good = make_tar([("a.txt", b"a")])
    for data in (gzip.compress(good), b"not a tar archive at all" * 40, good[:700]):
        with pytest.raises(StreamError):
            upload(tmp_path / "dest", data)
        assert os.listdir(tmp_path) == []


@pytest.mark.usefixtures("tar_filter")
def test_an_empty_body_is_an_empty_archive(tmp_path: Path) -> None:
    assert upload(tmp_path / "dest", b"") == {"paths": [], "truncated": False}
    assert (tmp_path / "dest").is_dir()


@pytest.mark.usefixtures("tar_filter")
def test_special_files_are_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("fifo")
        info.type = tarfile.FIFOTYPE
        tar.addfile(info)
    with pytest.raises(InvalidRequest, match="unsupported tar entry type: fifo"):
        upload(tmp_path / "dest", buffer.getvalue())
    assert os.listdir(tmp_path) == []


def test_aborted_upload_removes_its_staging(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    job = TarUpload(str(tmp_path))
    job.write(b"x" * 100)
    assert len(os.listdir(tmp_path)) == 1
    job.abort()
    job.abort()  # twice is harmless and leaves the destination's mode alone
    assert os.listdir(tmp_path) == []
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755


@pytest.mark.usefixtures("tar_filter")
def test_read_only_directories_in_the_archive(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("ro")
        info.type, info.mode = tarfile.DIRTYPE, 0o555
        tar.addfile(info)
        info = tarfile.TarInfo("ro/f.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"f"))
    upload(tmp_path / "dest", buffer.getvalue())
    assert (tmp_path / "dest" / "ro" / "f.txt").read_text() == "f"
    # the "data" extraction filter leaves directory modes at the default: the tree stays writable
    assert stat.S_IMODE((tmp_path / "dest" / "ro").stat().st_mode) == 0o777 & ~ops.UMASK
    assert os.listdir(tmp_path) == ["dest"]


def raw_tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, *, mode: int = 0o644, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, linkname
    return info


@pytest.mark.usefixtures("tar_filter")
def test_a_symlink_redirected_by_a_later_entry_is_refused(tmp_path: Path) -> None:
    # "x" resolves inside while "d/q" is missing; "d/q" -> ".." then makes "x" lead two levels up.
    data = raw_tar(
        (entry("x", tarfile.SYMTYPE, linkname="d/q/../.."), None),
        (entry("d", tarfile.DIRTYPE, mode=0o755), None),
        (entry("d/q", tarfile.SYMTYPE, linkname=".."), None),
    )
    with pytest.raises(InvalidRequest, match="tar entry escapes destination: x"):
        upload(tmp_path / "dest", data)
    assert os.listdir(tmp_path) == []


@pytest.mark.usefixtures("tar_filter")
def test_nothing_is_written_through_a_redirected_symlink(tmp_path: Path) -> None:
    # The staging tree is <dest>/.upload-*/tree: "x" leads to <dest>/outside.
    dest = tmp_path / "dest"
    outside = dest / "outside"
    outside.mkdir(parents=True)
    data = raw_tar(
        (entry("x", tarfile.SYMTYPE, linkname="d/q/../../../outside"), None),
        (entry("d", tarfile.DIRTYPE, mode=0o755), None),
        (entry("d/q", tarfile.SYMTYPE, linkname=".."), None),
        (entry("x/evil"), b"x"),
    )
    with pytest.raises(InvalidRequest, match="tar entry escapes destination: x"):
        upload(dest, data)
    assert os.listdir(outside) == []
    assert os.listdir(dest) == ["outside"]


@pytest.mark.usefixtures("tar_filter")
def test_a_hard_link_through_a_symlink_to_outside_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("secret")
    dest = tmp_path / "dest"
    data = raw_tar(
        (entry("up", tarfile.SYMTYPE, linkname="."), None),
        (entry("h", tarfile.LNKTYPE, linkname="up/../secret"), None),
    )
    with pytest.raises(InvalidRequest):
        upload(dest, data)
    assert sorted(os.listdir(tmp_path)) == ["secret"]
    assert secret.stat().st_nlink == 1


@pytest.mark.usefixtures("tar_filter")
def test_modes_lose_special_bits_and_owners_are_the_unpacking_user(tmp_path: Path) -> None:
    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = 4242, 4243, "someone", "somegroup"
        return info

    data = raw_tar(
        (owned(entry("d", tarfile.DIRTYPE, mode=0o7777)), None),
        (owned(entry("d/setuid", mode=0o6777)), b"s"),
        (owned(entry("d/none", mode=0o000)), b"n"),
        (owned(entry("d/group-exec", mode=0o070)), b"g"),
    )
    dest = tmp_path / "dest"
    upload(dest, data)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [dest / "d", *(dest / "d").iterdir()]}
    assert modes == {"d": 0o777 & ~ops.UMASK, "setuid": 0o755, "none": 0o600, "group-exec": 0o640}
    for path in [dest / "d", *(dest / "d").iterdir()]:
        assert (path.stat().st_uid, path.stat().st_gid) == (os.geteuid(), os.getegid())


def test_upload_refuses_a_file_as_destination(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError):
        TarUpload(str(tmp_path / "f"))
    with pytest.raises(NotADirectoryError):
        TarUpload(str(tmp_path / "f" / "sub"))
