"""Shared helpers for the permission and question tests: a bridge with the HITL probe agent,
replies, and reading what the probe agent received."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from app.agents.registry import AgentRegistry
from app.events.store import MemoryEventStore
from app.sessions.client_services import ClientServices
from app.sessions.manager import SessionManager
from app.settings import Settings
from tests.support import PROBES, Bridge, send, start_bridge, until_type, wait_for_events, wait_until

PROBE = PROBES / "hitl_agent.py"
ALL_KINDS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "never", "name": "Never", "kind": "reject_always"},
]


def agents_file(tmp: Path) -> Path:
    out_dir = tmp / "probe-out"
    out_dir.mkdir(exist_ok=True)
    path = tmp / "agents.toml"
    path.write_text(
        f'[agents.hitl]\ncommand = ["{sys.executable}", "{PROBE}"]\nenv = {{ PROBE_OUT_DIR = "{out_dir}" }}\n'
    )
    return path


def in_process_manager(tmp: Path) -> SessionManager:
    """The session layer without HTTP, for checks on tasks and pending state."""
    agents = agents_file(tmp)
    settings = Settings(data_dir=tmp / "data", agents_file=agents)
    return SessionManager(settings, AgentRegistry(agents), MemoryEventStore(), ClientServices())


def hitl_bridge(tmp: Path, env: dict[str, str] | None = None) -> Iterator[Bridge]:
    server = start_bridge(tmp, "--agents-file", str(agents_file(tmp)), env=env)
    server.out_dir = tmp / "probe-out"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def script(**parts: Any) -> str:
    """A prompt for the HITL probe agent."""
    return json.dumps(parts)


def permission(
    call_id: str,
    *,
    kind: str | None = "execute",
    options: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    **tool: Any,
) -> dict[str, Any]:
    tool_call: dict[str, Any] = {"toolCallId": call_id, **tool}
    if kind is not None:
        tool_call["kind"] = kind
    params: dict[str, Any] = {"toolCall": tool_call, "options": ALL_KINDS if options is None else options}
    if meta is not None:
        params["_meta"] = meta
    return {"method": "session/request_permission", "params": params}


def reply_permission(client: httpx.Client, sid: str, pid: str, reply: str) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/permissions/{pid}/reply", json={"reply": reply})


def reply_question(client: httpx.Client, sid: str, qid: str, answers: list[list[str]]) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/questions/{qid}/reply", json={"answers": answers})


def reject_question(client: httpx.Client, sid: str, qid: str) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/questions/{qid}/reject")


def of_type(evs: list[dict[str, Any]], event_type: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["type"] == event_type]


def wait_count(client: httpx.Client, sid: str, event_type: str, count: int = 1, **kw: Any) -> list[dict[str, Any]]:
    return wait_for_events(client, sid, lambda evs: len(of_type(evs, event_type)) >= count, **kw)


def probe_log(bridge: Bridge, sid: str) -> list[dict[str, Any]]:
    path = Path(bridge.out_dir) / f"{sid}.jsonl"  # type: ignore[attr-defined]
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def probe_answers(bridge: Bridge, sid: str, count: int, timeout: float = 10.0) -> list[Any]:
    """The answers the probe agent received, in request order, once it has ``count`` of them."""
    assert wait_until(lambda: len([e for e in probe_log(bridge, sid) if "answer" in e]) >= count, timeout), probe_log(
        bridge, sid
    )
    entries = sorted((e for e in probe_log(bridge, sid) if "answer" in e), key=lambda e: e["index"])
    return [e["answer"] for e in entries]


def probe_pid(bridge: Bridge, sid: str) -> int:
    path = Path(bridge.out_dir) / f"{sid}.pid"  # type: ignore[attr-defined]
    assert wait_until(path.exists, 5)
    return int(path.read_text())


def assistant_texts(evs: list[dict[str, Any]]) -> list[str]:
    return [
        part["text"]
        for e in of_type(evs, "item.completed")
        if e["data"]["item"]["role"] == "assistant"
        for part in e["data"]["item"]["content"]
        if part["type"] == "text"
    ]


OK_PROMPT = "Reply with exactly the single word OK."


def after_next_turn(client: httpx.Client, sid: str, offset: int) -> list[dict[str, Any]]:
    """Every event after ``offset`` through the end of one more (OK) turn: what a reply left in the
    log shows up before that turn's turn.started, without waiting for nothing to happen."""
    send(client, sid, OK_PROMPT)
    return wait_for_events(client, sid, until_type("turn.ended"), offset=offset)


def before_next_turn(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    starts = [i for i, e in enumerate(evs) if e["type"] == "turn.started"]
    return evs[: starts[-1]] if starts else evs
