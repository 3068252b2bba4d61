"""Cost of translating ACP updates (pure translate/, no I/O), per message.

    .venv/bin/python bench/translate_bench.py [--n 200000]

Measures, on already-parsed JSON-RPC messages:
- a streamed text chunk continuing a message (the hot path): translation alone, and translation
  plus the event log's append (envelope JSON, in-memory store);
- the same chunk validated with the ACP SDK's pydantic model, for comparison with the hand checks;
- a tool call (tool_call + 2 tool_call_updates with a small diff), per update.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from acp.schema import SessionNotification

from app.events.log import SessionEventLog
from app.events.store import MemoryEventStore
from app.translate.session_translator import SessionTranslator


def chunk(i: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "m1",
                "content": {"type": "text", "text": f"token {i} "},
            },
        },
    }


def timed(label: str, n: int, fn: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    per = (time.perf_counter() - start) / n * 1e6
    print(f"{label:<58} {per:7.2f} µs/message  ({1e6 / per:,.0f}/s)")
    return per


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    n = parser.parse_args().n
    messages = [chunk(i) for i in range(n)]

    t = SessionTranslator()
    t.session_update(messages[0]["params"], messages[0])
    timed("text chunk: translate", n, lambda i: t.session_update(messages[i]["params"], messages[i]))

    t = SessionTranslator()
    log = SessionEventLog("s", MemoryEventStore())
    log.native_session_id = "native"

    def translate_and_append(i: int) -> None:
        for draft in t.session_update(messages[i]["params"], messages[i]):
            log.append(draft)

    timed("text chunk: translate + log append (envelope JSON)", n, translate_and_append)

    small = min(n, 50_000)
    timed(
        "text chunk: SDK pydantic validation only (not used)",
        small,
        lambda i: SessionNotification.model_validate(messages[i]["params"]),
    )

    tools: list[dict[str, Any]] = []
    for i in range(n // 3):
        call_id = f"c{i}"
        tools.append(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": "edit",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"file_path": "/w/a.py"},
            }
        )
        tools.append({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})
        tools.append(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed",
                "content": [
                    {"type": "diff", "path": "/w/a.py", "oldText": "a = 1\nb = 2\n", "newText": "a = 1\nb = 3\n"}
                ],
            }
        )
    t = SessionTranslator()
    wrapped = [{"sessionId": "s", "update": u} for u in tools]
    timed(
        "tool call updates (with a small v1 diff): translate",
        len(wrapped),
        lambda i: t.session_update(wrapped[i], wrapped[i]),
    )


if __name__ == "__main__":
    main()
