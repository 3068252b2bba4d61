#!/usr/bin/env python3
"""A small ACP agent for the streaming tests (stdlib only). PROBE_MODE picks what a prompt does:

- hang          the prompt is never answered, session/cancel is ignored (the turn never ends)
- prompt_error  the prompt is answered with a JSON-RPC error
- split_emoji   an emoji cut in two across two chunks, lone surrogates in another message, a title
                and a tool call (JSON escapes, as a JavaScript agent's `slice` leaves them)
- (other)       one agent_message_chunk "probe: <text>", then end_turn
"""

from __future__ import annotations

import os
from typing import Any

import probe_rpc as rpc
from probe_rpc import Message

MODE = os.environ.get("PROBE_MODE", "")
SESSION = "stream-probe"


def prompt(msg: Message) -> None:
    if MODE == "hang":
        return
    if MODE == "prompt_error":
        rpc.error(msg, -32000, "probe refuses this prompt", {"probe": True})
        return
    if MODE == "split_emoji":
        split_emoji(msg)
        return
    rpc.update(SESSION, rpc.text_chunk(f"probe: {rpc.prompt_text(msg)}", "probe-msg"))
    rpc.result(msg, {"stopReason": "end_turn"})


def split_emoji(msg: Message) -> None:
    def update(body: dict[str, Any]) -> None:
        rpc.update(SESSION, body)

    update(rpc.text_chunk("smile \ud83d", "whole"))
    update(rpc.text_chunk("\ude00 done", "whole"))
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
    update(rpc.text_chunk("cut \ud83d", "lone"))
    update(rpc.text_chunk("x \udc00 y", "other"))
    rpc.result(msg, {"stopReason": "end_turn"})


def main() -> None:
    rpc.serve(
        {
            "initialize": lambda msg: rpc.result(msg, {"protocolVersion": 1, "agentCapabilities": {}}),
            "session/new": lambda msg: rpc.result(msg, {"sessionId": SESSION}),
            "session/prompt": prompt,
        }
    )


if __name__ == "__main__":
    main()
