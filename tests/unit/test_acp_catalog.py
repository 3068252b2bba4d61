"""The ACP registry catalog: reading entries, the shipped snapshot, npm specs, safe unpacking (the
link-chain archive on this Python and on Debian's /usr/bin/python3, which lacks tarfile's "data"
filter), checksums as catalogs write them, plain http refused (redirects included)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest

from app.agents import catalog_snapshot
from app.agents.acp_catalog import (
    BinaryTarget,
    PlainHttpRefused,
    expected_sha256,
    https_only,
    load_snapshot,
    parse_catalog,
    platform_key,
)
from app.agents.catalog_install import _unpack, package_spec
from app.errors import InstallFailed
from tests.support import ROOT

assert sys.version_info >= (3, 11)


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


def link_chain_archive() -> bytes:
    """Five links, each inside the destination when checked against the empty folder (``b`` does
    not exist yet when ``a -> b/..`` is checked...), that once all made lead three folders up:
    ``e -> .``, ``d -> e/..`` (the folder's parent), ``c -> d/..``, ``b -> c/..``; then a file
    through them: ``b/escaped`` lands beside the ``acp-registry`` folder (in the install dir)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, target in (("a", "b/.."), ("b", "c/.."), ("c", "d/.."), ("d", "e/.."), ("e", ".")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        info = tarfile.TarInfo("b/escaped")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
        info = tarfile.TarInfo("run")
        info.size, info.mode = 10, 0o755
        tar.addfile(info, io.BytesIO(b"#!/bin/sh\n"))
    return buffer.getvalue()


UNPACK = """
import sys
from pathlib import Path
from app.agents.acp_catalog import BinaryTarget
from app.agents.catalog_install import _unpack
from app.errors import InstallFailed
try:
    _unpack("t", Path(sys.argv[1]), BinaryTarget("https://h/a.tar.gz", "./run"), Path(sys.argv[2]))
except InstallFailed as exc:
    print("refused:", exc.details)
else:
    print("unpacked")
"""


@pytest.mark.parametrize("python", ["this", "/usr/bin/python3"])
def test_a_chain_of_links_leads_nothing_outside(tmp_path: Path, python: str) -> None:
    data_dir = tmp_path / "data"
    staging = data_dir / "bin" / "acp-registry" / ".t.staging-1"
    staging.mkdir(parents=True)
    archive = staging / ".download"
    archive.write_bytes(link_chain_archive())
    if python == "this":
        with pytest.raises(InstallFailed) as refused:
            _unpack("t", archive, BinaryTarget("https://h/a.tar.gz", "./run"), staging / "files")
        assert "outside the install folder" in str(refused.value.details), refused.value.details
    else:
        if not Path(python).exists():
            pytest.fail(f"{python} (Debian's Python, the Docker image's) is needed for this test")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        argv = [python, "-c", UNPACK, str(archive), str(staging / "files")]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
        assert done.stdout.startswith("refused:") and "outside the install folder" in done.stdout, (done, done.stderr)
    found = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.name == "escaped"]
    assert found == [], found


def test_members_over_links_and_hard_links_out_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    for members in (
        [("link", tarfile.SYMTYPE, "sub"), ("sub", tarfile.DIRTYPE, ""), ("link", tarfile.REGTYPE, "")],
        [("hard", tarfile.LNKTYPE, "../outside.txt")],
        [("dev", tarfile.CHRTYPE, "")],
    ):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, kind, link in members:
                info = tarfile.TarInfo(name)
                info.type, info.linkname = kind, link
                tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
        archive = tmp_path / "a.tar"
        archive.write_bytes(buffer.getvalue())
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        with pytest.raises(InstallFailed):
            _unpack("t", archive, BinaryTarget("https://h/a.tar", "./run"), out)
    assert outside.read_text() == "keep"


def test_a_sha256_is_read_as_catalogs_write_it() -> None:
    digest = "ab" * 32
    assert expected_sha256(digest) == digest
    assert expected_sha256("sha256:" + digest.upper()) == digest
    assert expected_sha256(f" SHA256:{digest} ") == digest
    for bad in (digest[:63], digest + "0", "md5:" + digest, "g" * 64, "", "sha256:"):
        with pytest.raises(ValueError, match="malformed sha256"):
            expected_sha256(bad)
    # Kept as written by the catalog reader: checked (and refused when malformed) at install.
    for written, kept in ((digest[:63], digest[:63]), (123, "123"), (f"sha256:{digest}", f"sha256:{digest}")):
        target_json = {"archive": "https://h/a", "cmd": "./a", "sha256": written}
        entry = {"id": "x", "version": "1", "distribution": {"binary": {platform_key(): target_json}}}
        target = parse_catalog({"agents": [entry]}, "test").agents[0].target()
        assert target is not None and target.sha256 == kept


async def test_plain_http_and_redirects_to_it_are_refused_unless_allowed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/redirect":
            return httpx.Response(302, headers={"Location": "http://mirror.test/archive"})
        return httpx.Response(200, content=b"ok")

    transport = httpx.MockTransport(answer)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True, event_hooks=https_only(False)) as client:
        assert (await client.get("https://registry.test/archive")).status_code == 200
        with pytest.raises(PlainHttpRefused, match=r"http://mirror\.test/archive is not https"):
            await client.get("https://registry.test/redirect")
        with pytest.raises(PlainHttpRefused):
            await client.get("http://registry.test/archive")
    async with httpx.AsyncClient(transport=transport, follow_redirects=True, event_hooks=https_only(True)) as client:
        assert (await client.get("https://registry.test/redirect")).status_code == 200
