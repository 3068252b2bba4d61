"""The Python client (clients/python) against real servers and the mock agent: every method, sync
and async, every error the server answers as a typed exception, an SSE stream cut again and again by
a proxy and resumed without a duplicate or a gap, and two spawned servers at once."""

from __future__ import annotations

import asyncio
import io
import socket
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from acp_rest_bridge_client import (
    AgentNotInstalledError,
    AgentProcessExitedError,
    AgentTimeoutError,
    AsyncSandboxAgent,
    InvalidRequestError,
    ModeNotSupportedError,
    PermissionDeniedError,
    SandboxAgent,
    SandboxAgentError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    StreamError,
    TokenInvalidError,
    UnsupportedAgentError,
    models,
)

from tests.support import Bridge, start_bridge

LIST_FILES = "List files in the current directory using available tools."
BRIDGE_BIN = str(Path(sys.executable).with_name("acp-rest-bridge"))


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    tmp = tmp_path_factory.mktemp("client")
    agents = tmp / "agents.toml"
    py = sys.executable
    agents.write_text(
        "[agents.exits]\n"
        f'command = ["{py}", "-c", "raise SystemExit(3)"]\n'
        "[agents.missing]\n"
        'command = ["/nonexistent/acp-agent"]\n'
        "[agents.silent]\n"
        f'command = ["{py}", "-c", "import time; time.sleep(60)"]\n'
    )
    root = tmp / "root"
    root.mkdir()
    bridge = start_bridge(
        tmp,
        "--agents-file",
        str(agents),
        "--fs-root",
        str(root),
        "--fs-root",
        str(tmp / "work"),
        token="secret",
        env={"ACP_BRIDGE_BODY_LIMIT": "65536", "ACP_BRIDGE_AGENT_START_TIMEOUT": "2"},
        cwd=root,
    )
    (tmp / "work").mkdir()
    try:
        yield bridge
    finally:
        bridge.stop()


@pytest.fixture
def client(bridge: Bridge) -> Iterator[SandboxAgent]:
    with SandboxAgent(bridge.url, token=bridge.token) as c:
        yield c


def root_of(bridge: Bridge) -> Path:
    return bridge.data_dir.parent / "root"


def until(stream: Iterator[models.UniversalEvent], kind: str) -> list[models.UniversalEvent]:
    seen = []
    for event in stream:
        seen.append(event)
        if event["type"] == kind:
            return seen
    raise AssertionError(f"the stream ended before a {kind}: {[e['type'] for e in seen]}")


def test_every_method_sync(bridge: Bridge, client: SandboxAgent, tmp_path: Path) -> None:
    assert client.get_health() == {"status": "ok"}
    assert "mock" in [a["id"] for a in client.list_agents()["agents"]]
    client.install_agent("mock")
    client.install_agent("mock", {"reinstall": False})
    assert [m["id"] for m in client.get_agent_modes("mock")["modes"]]
    assert "models" in client.get_agent_models("mock")
    assert client.create_session("sync", {"agent": "mock"})["healthy"] is True
    assert "sync" in [s["sessionId"] for s in client.list_sessions()["sessions"]]

    # A turn that asks a permission: the legacy turn stream stops at the request; the reply goes on.
    turn = list(client.post_message_stream("sync", LIST_FILES))
    asked_permission = turn[-1]
    assert turn[0]["type"] == "turn.started" and asked_permission["type"] == "permission.requested"
    client.reply_permission("sync", asked_permission["data"]["permission_id"], "once")
    with client.stream_events("sync", offset=asked_permission["sequence"]) as live:
        rest = until(live, "permission.resolved")
    resolved = rest[-1]
    assert resolved["type"] == "permission.resolved" and resolved["data"]["status"] == "accept"

    # A question, answered; another, rejected.
    client.post_message("sync", "question")
    with client.stream_events("sync", offset=rest[-1]["sequence"]) as live:
        asked = until(live, "question.requested")
    asked_question = asked[-1]
    assert asked_question["type"] == "question.requested"
    question = asked_question["data"]
    client.reply_question("sync", question["question_id"], {"answers": [[question["options"][0]]]})
    page = client.get_events("sync", offset=0, limit=1000, include_raw=True)
    assert page["hasMore"] is False and "raw" in page["events"][0]
    assert [e["sequence"] for e in page["events"]] == list(range(1, len(page["events"]) + 1))
    assert client.get_events("sync", offset=0, limit=1)["hasMore"] is True
    with client.get_events_sse("sync", offset=0) as response:
        assert response.headers["content-type"].startswith("text/event-stream")

    # Files, under the session's directory (the fs root the server runs in).
    work = tmp_path / "project"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.txt").write_text("alpha")
    uploaded = client.upload_directory(work, path="up", session_id="sync")
    assert any(p.endswith("up/sub/a.txt") for p in uploaded["paths"])
    assert client.read_fs_file("up/sub/a.txt", session_id="sync") == b"alpha"
    assert client.write_fs_file("w.txt", b"written", session_id="sync")["bytesWritten"] == 7
    assert client.stat_fs("w.txt", session_id="sync")["entryType"] == "file"
    assert client.mkdir_fs("d/e", session_id="sync")["path"].endswith("d/e")
    assert client.move_fs({"from": "w.txt", "to": "d/w.txt"}, session_id="sync")["to"].endswith("d/w.txt")
    names = {e["name"] for e in client.list_fs_entries(path="d", session_id="sync")}
    assert names == {"e", "w.txt"}
    assert client.delete_fs_entry("d", recursive=True, session_id="sync")["path"].endswith("/d")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("raw.txt")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"raw"))
    assert client.upload_fs_batch(buffer.getvalue(), path="raw", session_id="sync")["truncated"] is False

    client.terminate_session("sync")
    with pytest.raises(InvalidRequestError) as info_:
        client.post_message("sync", "hello")
    assert info_.value.status == 400 and info_.value.error_type == "invalid_request"
    assert info_.value.detail == "invalid request: session terminated"


def test_every_method_async(bridge: Bridge) -> None:
    async def main() -> None:
        async with AsyncSandboxAgent(bridge.url, token=bridge.token) as client:
            assert await client.get_health() == {"status": "ok"}
            assert (await client.list_agents())["agents"]
            await client.install_agent("mock")
            assert (await client.get_agent_modes("mock"))["modes"]
            await client.get_agent_models("mock")
            assert (await client.create_session("async", {"agent": "mock"}))["healthy"] is True
            assert "async" in [s["sessionId"] for s in (await client.list_sessions())["sessions"]]
            events = [e async for e in client.stream_turn("async", "echo hi")]
            assert events[-1]["type"] == "turn.ended"
            legacy = [e["type"] async for e in client.post_message_stream("async", "echo again")]
            assert legacy[0] == "turn.started" and legacy[-1] == "turn.ended"
            await client.post_message("async", LIST_FILES)
            async with client.stream_events("async", offset=events[-1]["sequence"]) as live:
                async for event in live:
                    if event["type"] == "permission.requested":
                        await client.reply_permission("async", event["data"]["permission_id"], "reject")
                    if event["type"] == "permission.resolved":
                        assert event["data"]["status"] == "reject"
                        break
            await client.post_message("async", "question")
            async with client.stream_events("async") as live:
                async for event in live:
                    if event["type"] == "question.requested":
                        await client.reject_question("async", event["data"]["question_id"])
                    if event["type"] == "question.resolved":
                        break
            page = await client.get_events("async", limit=2)
            assert len(page["events"]) == 2 and page["hasMore"]
            async with client.get_events_sse("async") as response:
                assert response.status_code == 200
            assert (await client.write_fs_file("a.txt", b"x", session_id="async"))["bytesWritten"] == 1
            assert await client.read_fs_file("a.txt", session_id="async") == b"x"
            assert (await client.stat_fs("a.txt", session_id="async"))["size"] == 1
            await client.mkdir_fs("m", session_id="async")
            await client.move_fs({"from": "a.txt", "to": "m/a.txt"}, session_id="async")
            assert [e["name"] for e in await client.list_fs_entries(path="m", session_id="async")] == ["a.txt"]
            await client.delete_fs_entry("m", recursive=True, session_id="async")
            project = root_of(bridge).parent / "async-project"
            project.mkdir()
            (project / "f").write_text("f")
            assert len((await client.upload_directory(project, path="p", session_id="async"))["paths"]) == 1
            await client.terminate_session("async")
            with pytest.raises(InvalidRequestError):
                await client.post_message("async", "again")

    asyncio.run(asyncio.wait_for(main(), 60))


def test_every_error_is_typed(bridge: Bridge, client: SandboxAgent) -> None:
    client.create_session("errors", {"agent": "mock"})
    cases: list[tuple[type[SandboxAgentError], int, Any]] = [
        (UnsupportedAgentError, 400, lambda: client.create_session("x1", {"agent": "no-such-agent"})),
        (ModeNotSupportedError, 400, lambda: client.create_session("x2", {"agent": "mock", "agentMode": "nope"})),
        (SessionAlreadyExistsError, 409, lambda: client.create_session("errors", {"agent": "mock"})),
        (SessionNotFoundError, 404, lambda: client.post_message("no-such-session", "hi")),
        (SessionNotFoundError, 404, lambda: client.list_fs_entries(session_id="no-such-session")),
        (AgentNotInstalledError, 404, lambda: client.create_session("x3", {"agent": "missing"})),
        (AgentProcessExitedError, 500, lambda: client.create_session("x4", {"agent": "exits"})),
        (AgentTimeoutError, 504, lambda: client.create_session("x5", {"agent": "silent"})),
        (PermissionDeniedError, 403, lambda: client.read_fs_file("/etc/hostname")),
        (InvalidRequestError, 413, lambda: client.write_fs_file("big", b"x" * 70_000, session_id="errors")),
        (InvalidRequestError, 422, lambda: client.create_session("x6", cast(Any, {"agent": 5}))),
        (InvalidRequestError, 400, lambda: client.reply_permission("errors", "no-such-permission", "once")),
        (StreamError, 502, lambda: client.mkdir_fs("a-file", session_id="errors")),
    ]
    (root_of(bridge) / "a-file").write_text("")
    for cls, status, call in cases:
        with pytest.raises(cls) as info:
            call()
        error = info.value
        assert error.status == status, (cls, error.status, error.problem)
        assert error.problem is not None and error.problem["status"] == status
        assert error.title and error.type and error.type.startswith("urn:sandbox-agent:error:")
    with SandboxAgent(bridge.url, token="wrong") as wrong, pytest.raises(TokenInvalidError) as info:
        wrong.list_sessions()
    assert info.value.status == 401 and info.value.error_type == "token_invalid"


# ---- a proxy that cuts every connection after a few kilobytes -----------------------------------
class CuttingProxy:
    """A TCP proxy to the server that closes each connection once it has passed ``cut`` bytes of the
    answer: an SSE stream dropped mid-frame, again and again."""

    def __init__(self, upstream: str, cut: int) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.cut = cut
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            up = socket.create_connection(self.upstream, timeout=30)
            threading.Thread(target=self._pipe, args=(conn, up, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, conn, self.cut), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, cut: int | None) -> None:
        sent = 0
        try:
            while True:
                chunk = src.recv(4096 if cut is None else min(4096, max(1, cut - sent)))
                if not chunk:
                    break
                dst.sendall(chunk)
                sent += len(chunk)
                if cut is not None and sent >= cut:
                    break
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()


def test_sse_stream_cut_by_a_proxy_resumes_without_duplicates_or_gaps(bridge: Bridge, client: SandboxAgent) -> None:
    client.create_session("cut", {"agent": "mock"})
    client.post_message("cut", "burst 3000 10")
    proxy = CuttingProxy(bridge.url, cut=60_000)
    try:
        with SandboxAgent(proxy.url, token=bridge.token) as through:
            sequences = []
            with through.stream_events("cut", reconnect_delay=0.01) as events:
                for event in events:
                    sequences.append(event["sequence"])
                    if event["type"] == "turn.ended":
                        break
    finally:
        proxy.close()
    assert sequences == list(range(1, len(sequences) + 1))
    assert len(sequences) > 3000
    assert proxy.connections > 10  # it was cut, many times
    direct = client.get_events("cut", limit=100_000)["events"]
    assert [e["sequence"] for e in direct][: len(sequences)] == sequences


def test_turn_stream_cut_by_a_proxy_is_followed_to_its_end(bridge: Bridge, client: SandboxAgent) -> None:
    client.create_session("cut-turn", {"agent": "mock"})
    proxy = CuttingProxy(bridge.url, cut=40_000)
    try:
        with SandboxAgent(proxy.url, token=bridge.token) as through:
            events = list(through.stream_turn("cut-turn", "burst 1500 10"))
    finally:
        proxy.close()
    assert events[0]["type"] == "turn.started" and events[-1]["type"] == "turn.ended"
    sequences = [e["sequence"] for e in events]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))
    assert proxy.connections > 1


def test_two_spawned_servers_at_once(tmp_path: Path) -> None:
    with (
        SandboxAgent.start(binary=BRIDGE_BIN, log="silent") as first,
        SandboxAgent.start(binary=BRIDGE_BIN, log="silent") as second,
    ):
        assert first.base_url != second.base_url and first.token != second.token
        assert first.get_health() == second.get_health() == {"status": "ok"}
        first.create_session("only-here", {"agent": "mock"})
        assert [s["sessionId"] for s in second.list_sessions()["sessions"]] == []
        with SandboxAgent(second.base_url, token=first.token) as crossed, pytest.raises(TokenInvalidError):
            crossed.list_sessions()
        processes = [first.process, second.process]
    assert all(p is not None and p.process.returncode is not None for p in processes)


def test_async_spawn(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncSandboxAgent.start(binary=BRIDGE_BIN, log="silent") as client:
            await client.create_session("a", {"agent": "mock"})
            events = [e async for e in client.stream_turn("a", "echo spawned")]
            assert events[-1]["type"] == "turn.ended"
            process = client.process
        assert process is not None and process.process.returncode is not None

    asyncio.run(asyncio.wait_for(main(), 60))
