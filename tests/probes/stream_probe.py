#!/usr/bin/env python3
"""A small ACP agent for the streaming tests (stdlib only). PROBE_MODE picks what a prompt does:

- hang          the prompt is never answered, session/cancel is ignored (the turn never ends)
- prompt_error  the prompt is answered with a JSON-RPC error
- split_emoji   an emoji cut in two across two chunks, lone surrogates in another message, a title
                and a tool call (JSON escapes, as a JavaScript agent's `slice` leaves them)
- (other)       one agent_message_chunk "probe: <text>", then end_turn
"""

import json
import os
import sys

MODE = os.environ.get("PROBE_MODE", "")


def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "stream-probe"}})
        elif method == "session/prompt":
            if MODE == "hang":
                continue
            if MODE == "prompt_error":
                error = {"code": -32000, "message": "probe refuses this prompt", "data": {"probe": True}}
                send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
                continue
            if MODE == "split_emoji":
                split_emoji(msg["id"])
                continue
            text = "".join(b.get("text", "") for b in msg["params"]["prompt"] if b.get("type") == "text")
            update = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "probe-msg",
                "content": {"type": "text", "text": f"probe: {text}"},
            }
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": "stream-probe", "update": update},
                }
            )
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
        elif "id" in msg and method is not None:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})


def update(body):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "stream-probe", "update": body}})


def split_emoji(request_id):
    def text(message_id, value):
        return {
            "sessionUpdate": "agent_message_chunk",
            "messageId": message_id,
            "content": {"type": "text", "text": value},
        }

    update(text("whole", "smile \ud83d"))
    update(text("whole", "\ude00 done"))
    update({"sessionUpdate": "session_info_update", "title": "title \ud800"})
    update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call-1",
            "title": "echo \udfff",
            "kind": "execute",
            "status": "completed",
            "rawInput": {"command": "echo \ud83d"},
            "content": [{"type": "content", "content": {"type": "text", "text": "output \ud800"}}],
        }
    )
    update(text("lone", "cut \ud83d"))
    update(text("other", "x \udc00 y"))
    send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
