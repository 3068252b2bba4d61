"""A failing observer or client-service handler never ends the SDK's receive loop: the failure is
logged with its traceback, recorded as unparsed / answered as an ACP error, and traffic goes on.
Runs a real probe agent process over stdio."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import pytest

from app.acp.connection import AgentConnection
from app.acp.process import AgentProcess
from tests.support import PROBES


class Crashing:
    def __init__(self) -> None:
        self.unparsed: list[tuple[bytes, str]] = []
        self.seen: list[dict[str, Any]] = []

    def on_incoming(self, message: dict[str, Any]) -> None:
        self.seen.append(message)
        if message.get("method") == "session/update":
            raise KeyError("observer bug")

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        self.unparsed.append((line, error))

    def on_outgoing(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/prompt":
            raise ValueError("outgoing observer bug")

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        raise RuntimeError("service bug")


async def run_probe(tmp_path: Any, mode: str) -> tuple[Crashing, Any]:
    process = await AgentProcess.spawn(
        [sys.executable, str(PROBES / "probe_agent.py")], env={"PROBE_MODE": mode}, cwd=str(tmp_path)
    )
    observer = Crashing()
    connection = AgentConnection(process, observer)
    try:
        async with asyncio.timeout(30):
            await connection.initialize({})
            new = await connection.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            result = await connection.request(
                "session/prompt", {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "hi"}]}
            )
    finally:
        await connection.close()
        await process.stop(1.0)
    return observer, result


async def test_crashing_observer_keeps_the_receive_loop(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    observer, result = await run_probe(tmp_path, "")
    assert result == {"stopReason": "end_turn"}  # the prompt's answer still arrived
    assert observer.unparsed and "KeyError" in observer.unparsed[0][1]
    assert b"probe: hi" in observer.unparsed[0][0]
    assert "observer bug" in caplog.text and "Traceback" in caplog.text
    assert "outgoing observer bug" in caplog.text


async def test_crashing_service_answers_an_acp_error(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    observer, result = await run_probe(tmp_path, "ask_client")
    assert result == {"stopReason": "end_turn"}
    answer = json.loads(
        next(m for m in observer.seen if m.get("method") == "session/update")["params"]["update"]["content"][
            "text"
        ].removeprefix("probe: ")
    )
    assert answer["error"]["code"] == -32603
    assert "RuntimeError: service bug" in json.dumps(answer)
    assert "client service fs/read_text_file failed" in caplog.text and "service bug" in caplog.text
