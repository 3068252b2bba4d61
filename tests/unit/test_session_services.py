"""What the bridge answers when an agent asks, each part alone on a fake session
(``session_fake.FakeSession``): the client services' dispatch and notifications, the file service
under the fs roots, and the terminals (real shell commands, no agent)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from app.acp.sdk import RequestError
from app.agents.registry import AgentSpec
from app.sessions import file_service, terminals
from app.sessions.client_services import ClientServices
from tests.unit.session_fake import FakeSession
from tests.unit.test_session_requests import permission


def code_of(error: pytest.ExceptionInfo[RequestError]) -> int:
    return error.value.code


async def test_a_request_is_observed_in_wire_order_then_handled(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    services = session.services
    message = permission(7)
    services.observe_request(session, message["method"], message)
    assert session.types() == ["permission.requested"]
    task = asyncio.create_task(services.handle(session, message["method"], message["params"], 7))
    await asyncio.sleep(0)
    # `$/cancel_request`: the agent no longer needs the answer; ACP still wants one.
    assert services.notify(session, "$/cancel_request", {"params": {"requestId": [7]}})  # no request has it
    assert not task.done()
    assert services.notify(session, "$/cancel_request", {"params": {"requestId": 7}})
    assert await task == {"outcome": {"outcome": "cancelled"}}
    assert session.types() == ["permission.requested", "permission.resolved"]


async def test_notifications_the_bridge_reads(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    services = session.services
    assert services.notify(session, "$/cancel_request", {"params": {}})
    assert session.types() == ["agent.unparsed"]
    assert services.notify(session, "_sandbox-agent/error", {"params": {"message": "quota exceeded"}})
    kind, error = session.events()[-1]
    assert (kind, error["message"]) == ("error", "quota exceeded")
    assert not services.notify(session, "_vendor/heartbeat", {})


async def test_unknown_and_disabled_methods_are_not_found(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, spec=AgentSpec("probe", None, disabled_services=frozenset({"fs/read_text_file"})))
    for method in ("x/unknown", "fs/read_text_file"):
        with pytest.raises(RequestError) as error:
            await session.services.handle(session, method, {}, 1)
        assert code_of(error) == -32601


async def test_tool_calls_are_remembered_from_updates(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    update = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "kind": "execute"}
    session.services.observe_update(session, {"method": "session/update", "params": {"update": update}})
    assert session.permissions.tool_calls.get("c1")
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    session.services.observe_update(session, {"method": "session/update", "params": {"update": chunk}})
    assert session.types() == []  # observing records nothing


async def test_a_handler_of_its_own_gets_the_session(tmp_path: Path) -> None:
    from app.sessions.client_services import ClientMethod

    seen: list[Any] = []

    async def handle(session: Any, params: Any, request_id: Any) -> Any:
        seen.append((session, params, request_id))
        return {"ok": True}

    session = FakeSession(tmp_path)
    services = ClientServices([ClientMethod("x/ping", handle, capability={"x": True})])
    assert await services.handle(session, "x/ping", {"a": 1}, 3) == {"ok": True}
    assert seen == [(session, {"a": 1}, 3)]


async def test_files_are_read_and_written_inside_the_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    session = FakeSession(tmp_path, fs_roots=[str(root)])
    path = str(root / "notes.txt")
    assert (
        await file_service.write_text_file(session, {"sessionId": "n", "path": path, "content": "a\nb\nc\n"}, 1) == {}
    )
    read = await file_service.read_text_file(session, {"sessionId": "n", "path": path, "line": 2, "limit": 1}, 2)
    assert read == {"content": "b\n"}
    with pytest.raises(RequestError) as error:
        await file_service.read_text_file(session, {"sessionId": "n", "path": str(root / "missing")}, 3)
    assert code_of(error) == file_service.RESOURCE_NOT_FOUND
    with pytest.raises(RequestError) as error:
        await file_service.read_text_file(session, {"sessionId": "n", "path": str(tmp_path / "outside")}, 4)
    assert code_of(error) == file_service.INTERNAL_ERROR and "outside the allowed" in str(error.value)
    with pytest.raises(RequestError) as error:
        await file_service.write_text_file(session, {"sessionId": "n", "path": "relative.txt", "content": ""}, 5)
    assert code_of(error) == -32602
    assert not (tmp_path / "outside").exists() and not os.path.exists("relative.txt")


async def test_a_terminal_runs_reports_and_is_released(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    params = {"sessionId": "n", "command": 'printf \'hi from %s\' "$(basename "$PWD")"; exit 3'}
    created = await terminals.create(session, params, 1)
    terminal_id = created["terminalId"]
    assert await terminals.wait_for_exit(session, {"terminalId": terminal_id}, 2) == {"exitCode": 3, "signal": None}
    output = await terminals.output(session, {"terminalId": terminal_id}, 3)
    assert output["output"] == f"hi from {tmp_path.name}" and output["exitStatus"]["exitCode"] == 3
    assert await terminals.release(session, {"terminalId": terminal_id}, 4) == {}
    assert session.terminals.output_of(terminal_id) == f"hi from {tmp_path.name}"  # kept for tool results
    with pytest.raises(RequestError) as error:
        await terminals.output(session, {"terminalId": terminal_id}, 5)
    assert code_of(error) == -32602
    with pytest.raises(RequestError):
        await terminals.kill(session, {}, 6)


async def test_a_terminal_is_killed_and_none_starts_once_the_session_ended(tmp_path: Path) -> None:
    session = FakeSession(tmp_path)
    created = await terminals.create(session, {"sessionId": "n", "command": "sleep", "args": ["30"]}, 1)
    assert await terminals.kill(session, {"terminalId": created["terminalId"]}, 2) == {}
    status = await terminals.wait_for_exit(session, {"terminalId": created["terminalId"]}, 3)
    assert status == {"exitCode": None, "signal": "SIGKILL"}
    await session.terminals.close_all()
    session.ended = True
    with pytest.raises(RequestError, match="the session has ended"):
        await terminals.create(session, {"sessionId": "n", "command": "true"}, 4)
