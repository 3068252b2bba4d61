#!/usr/bin/env python3
"""A minimal ACP agent for the benchmarks (stdlib only): it spends as little CPU as possible, so a
benchmark measures the bridge and not the agent.

- prompt ``burst N [SIZE]``: one assistant message as N ``agent_message_chunk`` notifications of
  SIZE characters (``<index:08d> xxx...``), written to stdout in one go, then ``end_turn``
- any other prompt: one chunk ``OK``, then ``end_turn``
"""

import json
import sys


def line(obj):
    return json.dumps(obj, separators=(",", ":")) + "\n"


def chunk(session_id, message_id, text):
    update = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }
    return line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})


def main():
    out = sys.stdout
    turns = 0
    for raw in sys.stdin:
        if not raw.strip():
            continue
        msg = json.loads(raw)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "burst", "version": "1"}}
            out.write(line({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
        elif method == "session/new":
            out.write(line({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "burst-session"}}))
        elif method == "session/prompt":
            turns += 1
            sid = msg["params"]["sessionId"]
            text = "".join(b.get("text", "") for b in msg["params"]["prompt"] if b.get("type") == "text").split()
            message_id = f"burst_{turns}"
            if text and text[0] == "burst":
                count = int(text[1]) if len(text) > 1 else 10_000
                size = int(text[2]) if len(text) > 2 else 32
                body = "".join(chunk(sid, message_id, f"{i:08d} ".ljust(size, "x")) for i in range(count))
            else:
                body = chunk(sid, message_id, "OK")
            out.write(body + line({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}}))
        elif "id" in msg and method is not None:
            out.write(
                line({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
            )
        out.flush()


if __name__ == "__main__":
    main()
