"""The records of temporary files: the sweep removes only the recorded name, only in the very
directory it was made in."""

from __future__ import annotations

import os
from pathlib import Path

from app.fs import ops
from app.fs.paths import Confinement
from app.fs.temps import TempBook, temp_name


def record(book: TempBook, folder: Path, name: str) -> None:
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        assert book.add(fd, name) is not None
    finally:
        os.close(fd)


def test_a_recorded_temporary_file_is_removed_and_nothing_else(tmp_path: Path) -> None:
    book = TempBook(str(tmp_path / "temps"))
    work = tmp_path / "work"
    work.mkdir()
    name = temp_name("f.txt")
    record(book, work, name)
    (work / name).write_text("partial")
    (work / "f.txt").write_text("the user's")
    stranger = temp_name("f.txt")
    (work / stranger).write_text("not recorded: not ours")
    staged = temp_name("upload")
    record(book, work, staged)
    (work / staged / "tree").mkdir(parents=True)
    assert book.sweep() == 2
    assert sorted(os.listdir(work)) == sorted(["f.txt", stranger])
    assert os.listdir(tmp_path / "temps") == []


def test_a_directory_replaced_since_is_left_alone(tmp_path: Path) -> None:
    book = TempBook(str(tmp_path / "temps"))
    work = tmp_path / "work"
    work.mkdir()
    name = temp_name("f.txt")
    record(book, work, name)
    work.rename(tmp_path / "moved")
    work.mkdir()
    (work / name).write_text("someone else's directory")
    assert book.sweep() == 0
    assert os.listdir(work) == [name]


def test_names_that_are_not_temporary_are_never_recorded(tmp_path: Path) -> None:
    book = TempBook(str(tmp_path / "temps"))
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        assert book.add(fd, "f.txt") is None
    finally:
        os.close(fd)


def test_a_write_records_its_temporary_file_until_it_is_done(tmp_path: Path) -> None:
    temps = tmp_path / "temps"
    fence = Confinement([], TempBook(str(temps)))
    writer = ops.AtomicWriter(str(tmp_path / "w" / "f.txt"), fence)
    writer.write(b"x")
    assert len(os.listdir(temps)) == 1
    writer.commit()
    assert os.listdir(temps) == []
    writer = ops.AtomicWriter(str(tmp_path / "w" / "g.txt"), fence)
    writer.abort()
    assert os.listdir(temps) == []
    assert os.listdir(tmp_path / "w") == ["f.txt"]
