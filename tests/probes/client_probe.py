#!/usr/bin/env python3
"""An ACP agent for tests (stdlib only) that calls the client's services and reports the answers.

A prompt is a JSON list of ``[method, params]`` calls. They are sent one after another (the
``sessionId`` is added), and the reply is one agent_message_chunk holding JSON:
``{"capabilities": <clientCapabilities from initialize>, "cwd": <session/new cwd>,
"responses": [{"result": ...} | {"error": ...}, ...]}``. A prompt that is not JSON gets the same
reply with no calls.
"""

import itertools
import json
import sys
import threading

out_lock = threading.Lock()
pending = {}
ids = itertools.count(1000)
state = {"capabilities": None, "cwd": None}


def send(obj):
    data = json.dumps(obj, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def call(method, params):
    request_id = next(ids)
    done = threading.Event()
    pending[request_id] = [done, None]
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    if not done.wait(60):
        return {"error": {"code": 0, "message": "probe: no answer in 60 s"}}
    message = pending.pop(request_id)[1]
    if "error" in message:
        return {"error": message["error"]}
    return {"result": message.get("result")}


def prompt(msg):
    params = msg["params"]
    sid = params["sessionId"]
    text = "".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    try:
        calls = json.loads(text)
    except ValueError:
        calls = []
    responses = [call(method, {"sessionId": sid, **call_params}) for method, call_params in calls]
    reply = json.dumps({**state, "responses": responses})
    update = {"sessionUpdate": "agent_message_chunk", "messageId": "probe", "content": {"type": "text", "text": reply}}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
    send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        if method is None:
            entry = pending.get(msg.get("id"))
            if entry is not None:
                entry[1] = msg
                entry[0].set()
        elif method == "initialize":
            state["capabilities"] = msg["params"].get("clientCapabilities")
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "client-probe"}}
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        elif method == "session/new":
            state["cwd"] = msg["params"].get("cwd")
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "client-probe-1"}})
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(msg,), daemon=True).start()
        elif "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
