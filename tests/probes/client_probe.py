#!/usr/bin/env python3
"""An ACP agent for tests (stdlib only) that calls the client's services and reports the answers.

A prompt is a JSON list of ``[method, params]`` calls. They are sent one after another (the
``sessionId`` is added), and the reply is one agent_message_chunk holding JSON:
``{"capabilities": <clientCapabilities from initialize>, "cwd": <session/new cwd>,
"responses": [{"result": ...} | {"error": ...}, ...]}``. A prompt that is not JSON gets the same
reply with no calls.
"""

from __future__ import annotations

import json
from typing import Any

import probe_rpc as rpc
from probe_rpc import Message

outgoing = rpc.Outgoing()
state: dict[str, Any] = {"capabilities": None, "cwd": None}


def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = outgoing.wait(outgoing.send(method, params), 60)
    if answer is None:
        return {"error": {"code": 0, "message": "probe: no answer in 60 s"}}
    if "error" in answer:
        return {"error": answer["error"]}
    return {"result": answer.get("result")}


def initialize(msg: Message) -> None:
    state["capabilities"] = msg["params"].get("clientCapabilities")
    rpc.result(msg, {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "client-probe"}})


def new_session(msg: Message) -> None:
    state["cwd"] = msg["params"].get("cwd")
    rpc.result(msg, {"sessionId": "client-probe-1"})


def prompt(msg: Message) -> None:
    sid = msg["params"]["sessionId"]
    try:
        calls = json.loads(rpc.prompt_text(msg))
    except ValueError:
        calls = []
    responses = [call(method, {"sessionId": sid, **call_params}) for method, call_params in calls]
    rpc.update(sid, rpc.text_chunk(json.dumps({**state, "responses": responses}), "probe"))
    rpc.result(msg, {"stopReason": "end_turn"})


def main() -> None:
    handlers = {"initialize": initialize, "session/new": new_session, "session/prompt": rpc.on_thread(prompt)}
    rpc.serve(handlers, outgoing)


if __name__ == "__main__":
    main()
