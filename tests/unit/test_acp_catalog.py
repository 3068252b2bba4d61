"""The ACP registry catalog: reading entries, the shipped snapshot, npm specs, safe unpacking."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from app.agents import catalog_snapshot
from app.agents.acp_catalog import BinaryTarget, load_snapshot, parse_catalog, platform_key
from app.agents.catalog_install import _unpack, package_spec
from app.errors import InstallFailed
from tests.support import ROOT


def test_entries_are_read_leniently() -> None:
    catalog = parse_catalog(
        {
            "agents": [
                {"id": "a", "version": "1.0.0", "distribution": {"npx": {"package": "a@1.0.0", "args": ["--acp", 3]}}},
                {"id": "b", "version": "2", "distribution": {"binary": {"linux-x86_64": {"archive": "x"}}}},
                {"id": "c", "distribution": {"uvx": {"package": "c"}}},
                "nonsense",
                {"id": "a", "version": "9", "distribution": {"npx": {"package": "again"}}},
            ]
        },
        "test",
    )
    assert [a.id for a in catalog.agents] == ["a", "c"]  # b's target has no cmd; the second a is a duplicate
    assert catalog.agents[0].npx is not None and catalog.agents[0].npx.args == ("--acp",)
    assert catalog.agents[0].distribution == "npx" and catalog.agents[1].distribution == "uvx"
    with pytest.raises(ValueError):
        parse_catalog({"version": "1"}, "test")
    # Ids name install folders; packages are arguments of npm and uv.
    hostile = parse_catalog(
        {
            "agents": [
                {"id": "../up", "version": "1", "distribution": {"npx": {"package": "x"}}},
                {"id": "Caps", "version": "1", "distribution": {"npx": {"package": "x"}}},
                {"id": "opt", "version": "1", "distribution": {"npx": {"package": "--prefix=/"}}},
                {"id": "ok", "version": "1", "distribution": {"npx": {"package": "x@1"}}},
            ]
        },
        "test",
    )
    assert [a.id for a in hostile.agents] == ["ok"]


def test_the_snapshot_ships_with_its_date_and_is_what_the_script_makes(tmp_path: Path) -> None:
    catalog = load_snapshot()
    assert catalog.date and catalog.source == "snapshot" and catalog.agents
    assert catalog.get("claude-code-acp") is not None
    # The script keeps only what the bridge reads: made again from the snapshot, it is the same.
    shipped = json.loads((ROOT / "app" / "agents" / "data" / "acp_registry.json").read_text())
    out = tmp_path / "again.json"
    catalog_snapshot.main(
        [str(ROOT / "app" / "agents" / "data" / "acp_registry.json"), "--date", shipped["date"], "--out", str(out)]
    )
    assert json.loads(out.read_text()) == shipped


def test_package_spec_takes_another_version() -> None:
    assert package_spec("@scope/name@1.0.0", "2.0.0") == "@scope/name@2.0.0"
    assert package_spec("name@1.0.0", "2.0.0") == "name@2.0.0"
    assert package_spec("@scope/name", "2.0.0") == "@scope/name@2.0.0"
    assert package_spec("@scope/name@1.0.0", None) == "@scope/name@1.0.0"


def test_platform_key_is_a_registry_target() -> None:
    assert platform_key().split("-")[0] in {"linux", "darwin", "windows"}


@pytest.mark.parametrize("name", ["../escape", "/abs/escape"])
def test_archives_cannot_place_files_outside(tmp_path: Path, name: str) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(name, b"x")
    archive = tmp_path / "a.zip"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(InstallFailed):
        _unpack("t", archive, BinaryTarget("http://h/a.zip", "./run"), tmp_path / "out")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(buffer.getvalue())
    # tar's "data" filter refuses `..` and puts an absolute name inside.
    with contextlib.suppress(InstallFailed, tarfile.TarError):
        _unpack("t", archive, BinaryTarget("http://h/a.tar.gz", "./run"), tmp_path / "out2")
    assert not (tmp_path / "escape").exists() and not Path("/abs/escape").exists()


def test_a_bare_program_is_kept_executable(tmp_path: Path) -> None:
    archive = tmp_path / "download"
    archive.write_bytes(b"#!/bin/sh\necho hi\n")
    _unpack("t", archive, BinaryTarget("http://h/agent", "./bin/agent"), tmp_path / "out")
    program = tmp_path / "out" / "bin" / "agent"
    assert program.read_bytes().startswith(b"#!/bin/sh") and program.stat().st_mode & 0o111
    with pytest.raises(InstallFailed):
        _unpack("t", archive, BinaryTarget("http://h/agent", "../../agent"), tmp_path / "out3")
