#!/usr/bin/env python3
"""An ACP agent for restart tests (stdlib only) that remembers its sessions on disk.

Every prompt is answered ``memory: [<earlier prompts, ' | '-separated>] now: <prompt>``, so a test
sees what the agent remembers. Prompts are kept in ``$PROBE_STATE_DIR/<session id>.json``.

PROBE_MEMORY (comma separated) says how a session is continued by a new process:

- ``load``    advertise ``loadSession``; ``session/load`` replays the history (a user_message_chunk
              and an agent_message_chunk per turn) before answering
- ``resume``  advertise ``sessionCapabilities.resume``; ``session/resume`` answers at once, no replay
- ``refuse``  advertise both, but answer ``session/resume`` and ``session/load`` with an error
- (none)      neither: only ``session/new`` (the memory is lost)

``slow <text>`` as a prompt streams one chunk, then waits for ``session/cancel`` (a turn that is
still running when the bridge dies). PROBE_PID_FILE receives this process's pid.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Any

import probe_rpc as rpc
from probe_rpc import Message

MODE = set(filter(None, os.environ.get("PROBE_MEMORY", "").split(",")))
STATE_DIR = os.environ.get("PROBE_STATE_DIR") or "."
cancelled = threading.Event()
sessions: dict[str, list[str]] = {}  # session id -> earlier prompts


def path(session_id: str) -> str:
    return os.path.join(STATE_DIR, session_id.replace("/", "_") + ".json")


def saved(session_id: str) -> list[str] | None:
    try:
        with open(path(session_id)) as fh:
            history: list[str] = json.load(fh)
            return history
    except (OSError, ValueError):
        return None


def save(session_id: str) -> None:
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(path(session_id), "w") as fh:
        json.dump(sessions[session_id], fh)


def reply_text(history: list[str], text: str) -> str:
    return f"memory: [{' | '.join(history)}] now: {text}"


def update(session_id: str, kind: str, text: str, message_id: str) -> None:
    rpc.update(session_id, rpc.text_chunk(text, message_id, kind))


def initialize(msg: Message) -> None:
    caps: dict[str, Any] = {"promptCapabilities": {}}
    if MODE & {"load", "refuse"}:
        caps["loadSession"] = True
    if MODE & {"resume", "refuse"}:
        caps["sessionCapabilities"] = {"resume": {}}
    rpc.result(msg, {"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": {"name": "memory-probe"}})


def new_session(msg: Message) -> None:
    session_id = f"mem-{uuid.uuid4().hex[:12]}"
    sessions[session_id] = []
    save(session_id)
    rpc.result(msg, {"sessionId": session_id})


def load_or_resume(msg: Message) -> None:
    session_id = (msg.get("params") or {}).get("sessionId")
    history = saved(session_id) if isinstance(session_id, str) else None
    if "refuse" in MODE or history is None or not isinstance(session_id, str):
        rpc.error(msg, -32002, f"Resource not found: {session_id}")
        return
    sessions[session_id] = history
    if msg["method"] == "session/load":
        for n, earlier in enumerate(history, 1):
            update(session_id, "user_message_chunk", earlier, f"user-{n}")
            update(session_id, "agent_message_chunk", reply_text(history[: n - 1], earlier), f"reply-{n}")
    rpc.result(msg, {})


def cancel(msg: Message) -> None:
    cancelled.set()


def prompt(msg: Message) -> None:
    session_id = msg["params"]["sessionId"]
    history = sessions.setdefault(session_id, [])
    text = rpc.prompt_text(msg)
    n = len(history) + 1
    answer = reply_text(history, text)
    history.append(text)
    save(session_id)
    if text.startswith("slow "):
        update(session_id, "agent_message_chunk", answer, f"reply-{n}")
        cancelled.wait(60)
        rpc.result(msg, {"stopReason": "cancelled"})
        return
    update(session_id, "agent_message_chunk", answer, f"reply-{n}")
    rpc.result(msg, {"stopReason": "end_turn"})


def main() -> None:
    if os.environ.get("PROBE_PID_FILE"):
        with open(os.environ["PROBE_PID_FILE"], "w") as fh:
            fh.write(f"{os.getpid()}\n")
    rpc.serve(
        {
            "initialize": initialize,
            "session/new": new_session,
            "session/load": load_or_resume,
            "session/resume": load_or_resume,
            "session/cancel": cancel,
            "session/prompt": rpc.on_thread(prompt),
        }
    )


if __name__ == "__main__":
    main()
