"""Private data dirs: made at start (owner-only), removed at exit, and one a killed server left is
removed by the next server that starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app import datadir
from app.settings import Settings


def test_private_data_dir_lifecycle_and_stale_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"acp-rest-bridge-{dead.stdout.strip()}-0badc0de"
    stale.mkdir()
    live = tmp_path / "acp-rest-bridge-1-0badc0de"  # pid 1 is alive
    live.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()

    settings = Settings()
    path = settings.resolved_data_dir()
    assert path.parent == tmp_path and not path.exists()
    datadir.prepare(settings)
    assert path.is_dir() and path.stat().st_mode & 0o777 == 0o700
    assert not stale.exists() and live.exists() and other.exists()
    datadir.remove(settings)
    assert not path.exists()


def test_a_configured_data_dir_is_made_when_missing_and_kept(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "a" / "data")
    datadir.prepare(settings)  # whatever store keeps the events (a fleet's: the database)
    assert (tmp_path / "a" / "data").is_dir() and (tmp_path / "a" / "data").stat().st_mode & 0o777 == 0o700
    datadir.prepare(settings)  # one that exists is left as it is
    datadir.remove(settings)
    assert (tmp_path / "a" / "data").exists()


def test_a_data_dir_that_cannot_be_made_is_said_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=f"cannot create the data dir {tmp_path / 'file' / 'data'}"):
        datadir.prepare(Settings(data_dir=tmp_path / "file" / "data"))
