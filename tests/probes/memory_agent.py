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

import json
import os
import sys
import threading
import uuid

MODE = set(filter(None, os.environ.get("PROBE_MEMORY", "").split(",")))
STATE_DIR = os.environ.get("PROBE_STATE_DIR") or "."
out_lock = threading.Lock()
cancelled = threading.Event()
sessions = {}  # session id -> list of earlier prompts


def send(obj):
    data = json.dumps(obj, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def path(session_id):
    return os.path.join(STATE_DIR, session_id.replace("/", "_") + ".json")


def saved(session_id):
    try:
        with open(path(session_id)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def save(session_id):
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(path(session_id), "w") as fh:
        json.dump(sessions[session_id], fh)


def reply_text(history, text):
    return f"memory: [{' | '.join(history)}] now: {text}"


def update(session_id, kind, text, message_id):
    content = {"type": "text", "text": text}
    payload = {"sessionUpdate": kind, "messageId": message_id, "content": content}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": payload}})


def result(msg, value):
    send({"jsonrpc": "2.0", "id": msg["id"], "result": value})


def error(msg, code, message):
    send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": code, "message": message}})


def main():
    if os.environ.get("PROBE_PID_FILE"):
        with open(os.environ["PROBE_PID_FILE"], "w") as fh:
            fh.write(f"{os.getpid()}\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "initialize":
            caps = {"promptCapabilities": {}}
            if MODE & {"load", "refuse"}:
                caps["loadSession"] = True
            if MODE & {"resume", "refuse"}:
                caps["sessionCapabilities"] = {"resume": {}}
            result(msg, {"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": {"name": "memory-probe"}})
        elif method == "session/new":
            session_id = f"mem-{uuid.uuid4().hex[:12]}"
            sessions[session_id] = []
            save(session_id)
            result(msg, {"sessionId": session_id})
        elif method in ("session/load", "session/resume"):
            session_id = params.get("sessionId")
            history = saved(session_id) if isinstance(session_id, str) else None
            if "refuse" in MODE or history is None:
                error(msg, -32002, f"Resource not found: {session_id}")
                continue
            sessions[session_id] = history
            if method == "session/load":
                for n, earlier in enumerate(history, 1):
                    update(session_id, "user_message_chunk", earlier, f"user-{n}")
                    update(session_id, "agent_message_chunk", reply_text(history[: n - 1], earlier), f"reply-{n}")
            result(msg, {})
        elif method == "session/cancel":
            cancelled.set()
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(msg,), daemon=True).start()
        elif "id" in msg and "method" in msg:
            error(msg, -32601, "Method not found")


def prompt(msg):
    params = msg["params"]
    session_id = params["sessionId"]
    history = sessions.setdefault(session_id, [])
    text = "".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    n = len(history) + 1
    answer = reply_text(history, text)
    history.append(text)
    save(session_id)
    if text.startswith("slow "):
        update(session_id, "agent_message_chunk", answer, f"reply-{n}")
        cancelled.wait(60)
        result(msg, {"stopReason": "cancelled"})
        return
    update(session_id, "agent_message_chunk", answer, f"reply-{n}")
    result(msg, {"stopReason": "end_turn"})


if __name__ == "__main__":
    main()
