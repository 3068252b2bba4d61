"""The client's streams and errors as a program meets them: a turn with two permission requests run
through to its end, streams stopped from another thread or task within a second, a closed client
that ends its streams, and a stopped server that every method reports with the client's own
connection error."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp_rest_bridge_client import (
    AsyncEventStream,
    AsyncSandboxAgent,
    ConnectError,
    EventStream,
    SandboxAgent,
    SandboxAgentError,
    models,
)

from tests.support import Bridge, start_bridge, wait_until

BRIDGE_BIN = str(Path(sys.executable).with_name("acp-rest-bridge"))
STOP_WITHIN = 1.0  # seconds: how soon close() ends a waiting iteration (the client's promise)


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("client-streams"), token="secret")
    yield server
    server.stop()


@pytest.fixture
def client(bridge: Bridge) -> Iterator[SandboxAgent]:
    with SandboxAgent(bridge.url, token=bridge.token) as c:
        yield c


def kinds(events: list[models.UniversalEvent]) -> list[str]:
    return [event["type"] for event in events]


# ---- turns that run through --------------------------------------------------------------------
def test_stream_turn_runs_through_two_permission_requests(client: SandboxAgent) -> None:
    """The mock's `confirm` asks twice and waits for each answer: both requests come through the
    one stream, each answered from the loop, and the stream ends with the turn."""
    client.create_session("confirm", {"agent": "mock"})
    events = []
    replies: list[models.PermissionReply] = ["once", "reject"]
    for event in client.stream_turn("confirm", "confirm"):
        events.append(event)
        if event["type"] == "permission.requested":
            client.reply_permission("confirm", event["data"]["permission_id"], replies.pop(0))
    asked = [e for e in events if e["type"] == "permission.requested"]
    resolved = [e["data"]["status"] for e in events if e["type"] == "permission.resolved"]
    assert len(asked) == 2 and resolved == ["accept", "reject"]
    last = events[-1]
    assert last["type"] == "turn.ended" and events[0]["type"] == "turn.started"
    assert last["data"].get("turn_id") == events[0]["data"].get("turn_id")
    said = [e for e in events if e["type"] == "item.completed" and e["data"]["item"].get("role") == "assistant"]
    assert said and said[-1]["data"]["item"]["content"] == [
        {"type": "text", "text": "Answers: allow-once, reject-once"}
    ]
    sequences = [e["sequence"] for e in events]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))

    # The legacy turn stream stops at the first request, as legacy's did; the rest is on /events/sse.
    legacy = list(client.post_message_stream("confirm", "confirm"))
    assert legacy[-1]["type"] == "permission.requested"
    with client.stream_events("confirm", offset=legacy[-1]["sequence"] - 1) as live:
        for event in live:
            if event["type"] == "permission.requested":
                client.reply_permission("confirm", event["data"]["permission_id"], "once")
            if event["type"] == "turn.ended":
                break


def test_async_stream_turn_answered_from_another_task(bridge: Bridge) -> None:
    async def main() -> list[str]:
        async with AsyncSandboxAgent(bridge.url, token=bridge.token) as client:
            await client.create_session("confirm-async", {"agent": "mock"})
            requests: asyncio.Queue[str] = asyncio.Queue()

            async def answer() -> None:
                for _ in range(2):
                    await client.reply_permission("confirm-async", await requests.get(), "once")

            answering = asyncio.create_task(answer())
            seen: list[str] = []
            async for event in client.stream_turn("confirm-async", "confirm"):
                seen.append(event["type"])
                if event["type"] == "permission.requested":
                    requests.put_nowait(event["data"]["permission_id"])
            await answering
            return seen

    seen = asyncio.run(asyncio.wait_for(main(), 60))
    assert seen.count("permission.requested") == 2 and seen[-1] == "turn.ended"


def test_stream_turn_ends_cleanly_when_the_session_ends(client: SandboxAgent) -> None:
    """Terminated while it waits for a reply, the turn ends (cancelled) and so does the stream; an
    agent that ends its session in place of the turn ends it with session.ended."""
    client.create_session("ends", {"agent": "mock"})
    events = []
    for event in client.stream_turn("ends", "confirm"):
        events.append(event)
        if event["type"] == "permission.requested":
            client.terminate_session("ends")  # from inside the loop, as a user gives up
    last = events[-1]
    assert last["type"] == "turn.ended" and last["data"].get("metadata") == {"stopReason": "cancelled"}
    client.create_session("ended", {"agent": "mock"})
    assert kinds(list(client.stream_turn("ended", "end")))[-1] == "session.ended"


# ---- streams that stop on request --------------------------------------------------------------
def blocked_in_read(thread: threading.Thread) -> bool:
    """Whether the thread waits in a socket read of the HTTP client (its stack, as Python has it)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "read" and frame.f_code.co_filename.endswith("_backends/sync.py"):
            return True
        frame = frame.f_back
    return False


def waiting(thread: threading.Thread, got: list[Any]) -> bool:
    """The reader has an event and waits in a read for the next."""
    return bool(got) and blocked_in_read(thread)


def reader(stream: EventStream) -> tuple[threading.Thread, list[Any]]:
    """A thread iterating the stream; its list gets each event, then "end" or the error."""
    got: list[Any] = []

    def run() -> None:
        try:
            for event in stream:
                got.append(event)
            got.append("end")
        except BaseException as exc:  # the test asserts there is none
            got.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_stream_blocked_in_another_thread_stops_on_close(client: SandboxAgent) -> None:
    client.create_session("stop", {"agent": "mock"})
    for close in ("stream", "client"):
        target = SandboxAgent(client.base_url, token=client.token) if close == "client" else client
        stream = target.stream_events("stop")
        thread, got = reader(stream)
        assert wait_until(partial(waiting, thread, got), 20), got  # session.started read, the next read waits
        started = time.monotonic()
        (target if close == "client" else stream).close()
        closed_in = time.monotonic() - started
        thread.join(STOP_WITHIN)
        assert not thread.is_alive() and closed_in < STOP_WITHIN, (close, closed_in)
        assert got[-1] == "end", got[-1]
        assert list(stream) == [] and stream.closed
    # The client closed above stopped its streams; this one goes on.
    assert client.get_health() == {"status": "ok"}


def test_closing_an_idle_stream_and_a_closed_client(client: SandboxAgent) -> None:
    """close() before, between and after iterations, in the iterating thread: no error, no event."""
    client.create_session("idle", {"agent": "mock"})
    stream = client.stream_events("idle")
    stream.close()
    assert list(stream) == []
    with client.stream_events("idle") as stream:
        assert next(stream)["type"] == "session.started"
    assert list(stream) == []
    other = SandboxAgent(client.base_url, token=client.token)
    other.close()
    assert list(other.stream_events("idle")) == []


def test_async_streams_stop_on_close_from_a_task_or_a_thread(bridge: Bridge) -> None:
    async def main() -> None:
        async with AsyncSandboxAgent(bridge.url, token=bridge.token) as client:
            await client.create_session("stop-async", {"agent": "mock"})
            for how in ("task", "thread", "client"):
                target = AsyncSandboxAgent(bridge.url, token=bridge.token) if how == "client" else client
                stream = target.stream_events("stop-async")
                first = asyncio.Event()

                async def read(stream: AsyncEventStream = stream, first: asyncio.Event = first) -> int:
                    count = 0
                    async for _ in stream:
                        count += 1
                        first.set()
                    return count

                reading = asyncio.create_task(read())
                await asyncio.wait_for(first.wait(), 20)  # session.started read; the next read waits
                started = time.monotonic()
                if how == "task":
                    stream.close()
                elif how == "thread":
                    await asyncio.to_thread(stream.close)
                else:
                    await target.close()
                count = await asyncio.wait_for(reading, STOP_WITHIN)
                assert count >= 1 and time.monotonic() - started < STOP_WITHIN, how
                await stream.aclose()
                assert [e async for e in stream] == []
            assert await client.get_health() == {"status": "ok"}

    asyncio.run(asyncio.wait_for(main(), 60))


# ---- a stopped server ---------------------------------------------------------------------------
# An argument list for every public method (a new method must be added here).
CALLS: dict[str, tuple[Any, ...]] = {
    "get_health": (),
    "list_agents": (),
    "install_agent": ("mock",),
    "get_agent_modes": ("mock",),
    "get_agent_models": ("mock",),
    "create_session": ("s", {"agent": "mock"}),
    "list_sessions": (),
    "post_message": ("s", "hi"),
    "get_events": ("s",),
    "get_events_sse": ("s",),
    "post_message_stream": ("s", "hi"),
    "stream_turn": ("s", "hi"),
    "stream_events": ("s",),
    "reply_question": ("s", "q", {"answers": [["a"]]}),
    "reject_question": ("s", "q"),
    "reply_permission": ("s", "p", "once"),
    "terminate_session": ("s",),
    "list_fs_entries": (),
    "read_fs_file": ("f",),
    "write_fs_file": ("f", b"x"),
    "delete_fs_entry": ("f",),
    "mkdir_fs": ("d",),
    "move_fs": ({"from": "a", "to": "b"},),
    "stat_fs": ("f",),
    "upload_fs_batch": (b"",),
    "upload_directory": (".",),
}
NOT_CALLS = {"start", "close", "dispose", "process"}


def public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")} - NOT_CALLS - {"base_url"}


def test_a_stopped_server_raises_the_connection_error_everywhere(tmp_path: Path) -> None:
    assert public_methods(SandboxAgent) == set(CALLS) == public_methods(AsyncSandboxAgent)
    with SandboxAgent.start(binary=BRIDGE_BIN, log="silent") as running:
        url, token = running.base_url, running.token
        assert running.process is not None
        running.process.stop()

    def check(name: str, error: BaseException) -> None:
        assert isinstance(error, ConnectError), (name, error)
        assert isinstance(error, SandboxAgentError) and error.status == 0
        assert isinstance(error.__cause__, httpx.ConnectError), (name, error.__cause__)
        assert url.split("//")[1] in str(error), (name, str(error))

    with SandboxAgent(url, token=token) as client:
        for name, args in CALLS.items():
            call: Callable[..., Any] = getattr(client, name)
            with pytest.raises(SandboxAgentError) as info:
                result = call(*args)
                if isinstance(result, EventStream):
                    next(result)
                elif name == "get_events_sse":
                    result.__enter__()
            check(name, info.value)

    async def main() -> None:
        async with AsyncSandboxAgent(url, token=token) as client:
            for name, args in CALLS.items():
                call: Callable[..., Any] = getattr(client, name)
                with pytest.raises(SandboxAgentError) as info:
                    if name.startswith("stream_") or name == "post_message_stream":
                        await anext(call(*args))
                    elif name == "get_events_sse":
                        await call(*args).__aenter__()
                    else:
                        await call(*args)
                check(name, info.value)

    asyncio.run(asyncio.wait_for(main(), 60))
