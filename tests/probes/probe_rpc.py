"""JSON-RPC over stdio for the probe agents (stdlib only): one message a line, as ACP frames it.

The probes run as scripts (``python3 tests/probes/<probe>.py``), so they import this module from
their own folder; a probe copied elsewhere (an npm package in the install tests) takes it along.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

Message = dict[str, Any]
Handler = Callable[[Message], None]

# Prompts are answered on their own threads: whole lines, never two interleaved.
OUT_LOCK = threading.Lock()
METHOD_NOT_FOUND = -32601


def write_text(text: str) -> None:
    """Raw text on stdout (a non-JSON line, a line written in parts), flushed."""
    with OUT_LOCK:
        sys.stdout.write(text)
        sys.stdout.flush()


def write(message: Message) -> None:
    write_text(json.dumps(message, separators=(",", ":")) + "\n")


def result(request: Message, value: Any) -> None:
    write({"jsonrpc": "2.0", "id": request["id"], "result": value})


def error(request: Message, code: int, message: str, data: Any = None) -> None:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    write({"jsonrpc": "2.0", "id": request["id"], "error": body})


def notify(method: str, params: dict[str, Any]) -> None:
    write({"jsonrpc": "2.0", "method": method, "params": params})


def update(session_id: str, payload: dict[str, Any]) -> None:
    """A ``session/update`` notification."""
    notify("session/update", {"sessionId": session_id, "update": payload})


def text_chunk(text: str, message_id: str | None = None, kind: str = "agent_message_chunk") -> dict[str, Any]:
    """A ``session/update`` payload carrying one text block."""
    payload: dict[str, Any] = {"sessionUpdate": kind}
    if message_id is not None:
        payload["messageId"] = message_id
    payload["content"] = {"type": "text", "text": text}
    return payload


def prompt_text(request: Message) -> str:
    """The text blocks of a ``session/prompt`` request, joined."""
    blocks = request["params"]["prompt"]
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def on_thread(handler: Handler) -> Handler:
    """``handler`` run on its own thread, so the reader goes on (a prompt waiting for answers)."""

    def start(message: Message) -> None:
        threading.Thread(target=handler, args=(message,), daemon=True).start()

    return start


class Outgoing:
    """Requests this agent sends to the client, and the answers they wait for."""

    def __init__(self, first_id: int = 1000) -> None:
        self.next_id = first_id
        self.lock = threading.Lock()
        self.slots: dict[Any, tuple[threading.Event, list[Message]]] = {}

    def send(self, method: str, params: dict[str, Any], request_id: Any = None) -> Any:
        """Send a request (numbered from ``first_id`` unless given an id); its id."""
        with self.lock:
            if request_id is None:
                request_id = self.next_id
                self.next_id += 1
            self.slots[request_id] = (threading.Event(), [])
        write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def wait(self, request_id: Any, timeout: float) -> Message | None:
        """The answer to ``request_id`` (with ``result`` or ``error``), or None after ``timeout``."""
        done, answer = self.slots[request_id]
        done.wait(timeout)
        return answer[0] if answer else None

    def answered(self, response: Message) -> None:
        slot = self.slots.get(response.get("id"))
        if slot is not None:
            slot[1].append(response)
            slot[0].set()


def messages() -> Iterator[Message]:
    """Every message on stdin, until it closes."""
    for line in sys.stdin:
        line = line.strip()
        if line:
            yield json.loads(line)


def serve(handlers: dict[str, Handler], outgoing: Outgoing | None = None) -> None:
    """Dispatch stdin until it closes: requests and notifications to ``handlers`` by method (a request
    with none is answered "Method not found"), answers to ``outgoing``."""
    for message in messages():
        method = message.get("method")
        if method is None:
            if outgoing is not None and "id" in message:
                outgoing.answered(message)
            continue
        handler = handlers.get(method)
        if handler is not None:
            handler(message)
        elif "id" in message:
            error(message, METHOD_NOT_FOUND, "Method not found")
