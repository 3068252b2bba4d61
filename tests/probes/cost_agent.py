#!/usr/bin/env python3
"""An ACP agent for the cost test (stdlib only): each answer is one ``os.write``, so the bridge reads
it whole, and what it costs the bridge does not depend on how the pipe happened to split it.

- prompt ``burst N``: one assistant message as N ``agent_message_chunk`` notifications, then
  ``end_turn``, all in one write;
- any other prompt: one chunk ``OK``, then ``end_turn``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def line(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def chunk(session_id: str, message_id: str, text: str) -> str:
    update = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }
    return line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})


def send(text: str) -> None:
    data = text.encode()
    while data:
        data = data[os.write(1, data) :]


def main() -> None:
    turns = 0
    for raw in sys.stdin:
        if not raw.strip():
            continue
        msg = json.loads(raw)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "cost", "version": "1"}}
            send(line({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
        elif method == "session/new":
            send(line({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "cost-session"}}))
        elif method == "session/prompt":
            turns += 1
            sid = msg["params"]["sessionId"]
            words = "".join(b.get("text", "") for b in msg["params"]["prompt"] if b.get("type") == "text").split()
            message_id = f"cost_{turns}"
            if words[:1] == ["burst"]:
                lines = [chunk(sid, message_id, f"{index:08d} ".ljust(32, "x")) for index in range(int(words[1]))]
            else:
                lines = [chunk(sid, message_id, "OK")]
            lines.append(line({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}}))
            send("".join(lines))
        elif "id" in msg and method is not None:
            send(line({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}))


if __name__ == "__main__":
    main()
