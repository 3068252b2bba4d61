#!/usr/bin/env python3
"""A minimal ACP agent for the benchmarks (stdlib only): it spends as little CPU as possible, so a
benchmark measures the bridge and not the agent.

- prompt ``burst N [SIZE]``: one assistant message as N ``agent_message_chunk`` notifications of
  SIZE characters (``<index:08d> xxx...``), then ``end_turn``. The lines are written as they are
  made, 64 KiB at a time, as a streaming agent does: the reader can start while the rest is made.
- any other prompt: one chunk ``OK``, then ``end_turn``
"""

import json
import sys

WRITE_SIZE = 1 << 16


def line(obj):
    return json.dumps(obj, separators=(",", ":")) + "\n"


def chunk(session_id, message_id, text):
    update = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }
    return line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})


def burst(out, session_id, message_id, count, size):
    # Every line is the chunk() of its text; only the text differs, so the rest is made once. The
    # text is digits and "x": nothing in it needs escaping.
    head, tail = chunk(session_id, message_id, "\0").split("\\u0000")
    pending = []
    pending_size = 0
    for index in range(count):
        text = f"{index:08d} ".ljust(size, "x")
        pending.append(head + text + tail)
        pending_size += len(text) + len(head) + len(tail)
        if pending_size >= WRITE_SIZE:
            out.write("".join(pending))
            out.flush()
            pending.clear()
            pending_size = 0
    out.write("".join(pending))


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
                burst(out, sid, message_id, count, size)
            else:
                out.write(chunk(sid, message_id, "OK"))
            out.write(line({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}}))
        elif "id" in msg and method is not None:
            out.write(
                line({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
            )
        out.flush()


if __name__ == "__main__":
    main()
