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

from __future__ import annotations

import json
import os
from typing import Any

import probe_rpc as rpc
from probe_rpc import Message

outgoing = rpc.Outgoing(first_id=1001)
state: dict[str, Any] = {"caps": None, "out": None, "cancelled": False}


def log(entry: dict[str, Any]) -> None:
    path = state["out"]
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()


def initialize(msg: Message) -> None:
    state["caps"] = msg["params"].get("clientCapabilities")
    info = {"name": "hitl-probe", "version": "1"}
    rpc.result(msg, {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": info})


def new_session(msg: Message) -> None:
    legacy = (msg["params"].get("_meta") or {}).get("sandbox-agent/sessionId", "session")
    out_dir = os.environ.get("PROBE_OUT_DIR")
    if out_dir:
        name = legacy.replace("/", "_")
        state["out"] = os.path.join(out_dir, name + ".jsonl")
        with open(os.path.join(out_dir, name + ".pid"), "w") as fh:
            fh.write(str(os.getpid()))
    log({"initialize": state["caps"]})
    rpc.result(msg, {"sessionId": "hitl-" + legacy})


def cancel(msg: Message) -> None:
    state["cancelled"] = True
    log({"received": "session/cancel"})


def prompt(msg: Message) -> None:
    sid = msg["params"]["sessionId"]
    state["cancelled"] = False
    script = json.loads(rpc.prompt_text(msg))
    for update in script.get("updates", []):
        rpc.update(sid, update)
    ids = [
        outgoing.send(request["method"], {"sessionId": sid, **request.get("params", {})})
        for request in script.get("requests", [])
    ]
    for update in script.get("updates_after", []):  # e.g. a tool call announced after its permission
        rpc.update(sid, update)
    for index in script.get("cancel", []):
        rpc.notify("$/cancel_request", {"requestId": ids[index]})
    if "exit" in script:
        os._exit(int(script["exit"]))
    answers = []
    for index, request_id in enumerate(ids):
        response = outgoing.wait(request_id, 60)
        answer = response.get("result", response.get("error")) if response else None
        log({"index": index, "method": script["requests"][index]["method"], "answer": answer})
        answers.append(answer)
    rpc.update(sid, rpc.text_chunk(json.dumps(answers)))
    rpc.result(msg, {"stopReason": "cancelled" if state["cancelled"] else "end_turn"})


def main() -> None:
    handlers = {
        "initialize": initialize,
        "session/new": new_session,
        "session/cancel": cancel,
        "session/prompt": rpc.on_thread(prompt),
    }
    rpc.serve(handlers, outgoing)


if __name__ == "__main__":
    main()
