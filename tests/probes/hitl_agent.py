#!/usr/bin/env python3
"""An ACP agent for human-in-the-loop tests (stdlib only).

Each prompt is a JSON script:

    {"updates": [<session/update payloads sent first>],
     "requests": [{"method": "session/request_permission", "params": {...}}, ...],   # sent at once
     "updates_after": [<session/update payloads sent after the requests>],
     "cancel": [<indices of requests to withdraw with $/cancel_request>],
     "exit": <code: exit right after sending the requests>}

The agent waits for every answer, then replies with one agent_message_chunk holding the answers as
JSON and ends the turn (``cancelled`` if a session/cancel arrived). What it receives is written to
``$PROBE_OUT_DIR/<legacy session id>.jsonl`` (the initialize capabilities, then one line per answer),
and its pid to ``<legacy session id>.pid``, so tests can check the agent's side.
"""

import json
import os
import sys
import threading

out_lock = threading.Lock()
state = {"caps": None, "next_id": 1000, "out": None, "cancelled": False}
waiting = {}  # request id -> [threading.Event, response]


def send(obj):
    data = json.dumps(obj, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def log(entry):
    path = state["out"]
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        if method is None and "id" in msg:
            slot = waiting.get(msg["id"])
            if slot is not None:
                slot[1] = msg
                slot[0].set()
        elif method == "initialize":
            state["caps"] = msg["params"].get("clientCapabilities")
            info = {"name": "hitl-probe", "version": "1"}
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": info}
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        elif method == "session/new":
            legacy = (msg["params"].get("_meta") or {}).get("sandbox-agent/sessionId", "session")
            out_dir = os.environ.get("PROBE_OUT_DIR")
            if out_dir:
                name = legacy.replace("/", "_")
                state["out"] = os.path.join(out_dir, name + ".jsonl")
                with open(os.path.join(out_dir, name + ".pid"), "w") as fh:
                    fh.write(str(os.getpid()))
            log({"initialize": state["caps"]})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "hitl-" + legacy}})
        elif method == "session/cancel":
            state["cancelled"] = True
            log({"received": "session/cancel"})
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(msg,), daemon=True).start()
        elif "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})


def prompt(msg):
    params = msg["params"]
    sid = params["sessionId"]
    state["cancelled"] = False
    text = "".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    script = json.loads(text)
    for update in script.get("updates", []):
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
    ids = []
    for request in script.get("requests", []):
        state["next_id"] += 1
        request_id = state["next_id"]
        waiting[request_id] = [threading.Event(), None]
        ids.append(request_id)
        payload = {"sessionId": sid, **request.get("params", {})}
        send({"jsonrpc": "2.0", "id": request_id, "method": request["method"], "params": payload})
    for update in script.get("updates_after", []):  # e.g. a tool call announced after its permission
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
    for index in script.get("cancel", []):
        send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": ids[index]}})
    if "exit" in script:
        os._exit(int(script["exit"]))
    answers = []
    for index, request_id in enumerate(ids):
        slot = waiting[request_id]
        slot[0].wait(60)
        response = slot[1]
        answer = response.get("result", response.get("error")) if response else None
        log({"index": index, "method": script["requests"][index]["method"], "answer": answer})
        answers.append(answer)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(answers)}}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": chunk}})
    stop = "cancelled" if state["cancelled"] else "end_turn"
    send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": stop}})


if __name__ == "__main__":
    main()
