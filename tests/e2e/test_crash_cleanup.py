"""Nothing left behind by a crash: a server killed with SIGKILL while PUTs and uploads were
streaming and an agent install was running; the next server on the same data dir removes the
hidden temporary files from the user's directory and ends npm and removes its staging folder, and
leaves a user's file that merely looks like a temporary file alone."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.e2e.test_install_failfast import (  # noqa: F401 (silent_registry: a fixture)
    _running,
    install_in_background,
    npm_env,
    silent_registry,
)
from tests.support import Bridge, start_bridge, wait_until
from tests.unit.test_fs import make_tar


def kill_9(bridge: Bridge) -> None:
    bridge.proc.send_signal(signal.SIGKILL)
    bridge.proc.wait(10)


def test_temporary_files_of_writes_and_uploads_cut_by_kill_9_are_removed_at_the_next_start(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("keep")
    decoy = work / ".f.txt.bridge-0123456789abcdef"  # the user's, named like a temporary file
    decoy.write_text("the user's")
    bridge = start_bridge(tmp_path, data_dir=data)
    release = threading.Event()

    def body(first: bytes) -> Iterator[bytes]:
        yield first
        release.wait(30)  # the server is killed meanwhile
        yield b"rest"

    def send(method: str, route: str, path: Path, first: bytes) -> None:
        headers = {"content-type": "application/x-tar"}
        try:
            httpx.request(method, bridge.url + route, params={"path": str(path)}, content=body(first), headers=headers)
        except httpx.HTTPError:
            pass  # the server went away: expected

    senders = [
        threading.Thread(target=send, args=("PUT", "/v1/fs/file", work / "f.txt", b"x" * 70000), daemon=True),
        threading.Thread(
            target=send, args=("POST", "/v1/fs/upload-batch", work / "up", make_tar([("a", b"a" * 70000)])[:65536])
        ),
    ]
    try:
        for sender in senders:
            sender.start()

        def temps() -> list[str]:
            return sorted(n for n in os.listdir(work) if n.startswith(".") and n != decoy.name)

        assert wait_until(lambda: len(temps()) == 2, 30), (os.listdir(work), bridge.log())
        assert [n.split(".bridge-")[0] for n in temps()] == [".f.txt", ".upload"]
        kill_9(bridge)
        release.set()
        for sender in senders:
            sender.join(30)
        assert len(temps()) == 2  # what a killed server leaves

        again = start_bridge(tmp_path, data_dir=data)
        try:
            assert sorted(os.listdir(work)) == [decoy.name, "keep.txt"]
            assert decoy.read_text() == "the user's"
            assert "removed 2 temporary files" in again.log()
            assert os.listdir(data / "temps") == []
        finally:
            again.stop()
    finally:
        release.set()
        bridge.stop()


def test_an_install_cut_by_kill_9_is_ended_and_removed_at_the_next_start(
    tmp_path: Path,
    silent_registry: str,  # noqa: F811
    npm: None,
) -> None:
    data = tmp_path / "data"
    env = npm_env(tmp_path, silent_registry)
    bridge = start_bridge(tmp_path, data_dir=data, env=env)
    try:
        caller = install_in_background(bridge)
        bin_dir = data / "bin"

        def staging() -> Path | None:
            found = [p for p in bin_dir.iterdir() if p.name.startswith(".claude.staging")] if bin_dir.exists() else []
            return found[0] if found else None

        assert wait_until(lambda: staging() is not None, 30), bridge.log()
        folder = staging()
        assert folder is not None
        assert wait_until(lambda: bool(_running(str(folder))), 30), bridge.log()  # npm waits for the registry
        kill_9(bridge)
        caller.join(10)
        # npm may outlive its server (waiting on the registry) or end at its next write to the
        # closed pipe; either way the next start ends what runs and removes the folder.
        assert folder.exists()

        again = start_bridge(tmp_path, data_dir=data, env=env)
        try:
            assert wait_until(lambda: _running(str(folder)) == [], 5)
            assert not folder.exists()
            assert "removed 1 working directories" in again.log()
        finally:
            again.stop()
    finally:
        bridge.stop()
        for proc in _running(str(tmp_path)):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
