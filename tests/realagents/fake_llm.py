"""A scripted stand-in for hosted model APIs, so real coding agents run offline on 127.0.0.1.

Stdlib only. One ``ThreadingHTTPServer`` answers, streamed as SSE or as plain JSON:

- Anthropic Messages: ``POST /v1/messages`` (+ ``/v1/messages/count_tokens``) — Claude adapters
- Gemini: ``POST /v1beta/models/<model>:streamGenerateContent`` / ``:generateContent`` / ``:countTokens``

What the "model" does is written in the prompt as a directive::

    [scenario:think,plan,write,edit,read,shell dir=/abs/work/dir]

The server finds the newest user message holding a directive, counts the tool calls made since,
and answers the next step as exactly **one** tool call, chosen among the tools the agent offers
and filled in from that tool's JSON schema. After the last step comes a final text ending in
``FAKE-LLM-FINAL``. Steps: ``plan write edit read shell touch text slow``; ``think`` adds reasoning to
every answer. A request without tools (titles, summaries, side calls) gets plain text, so no
agent can loop on it.

Run alone: ``python -m tests.realagents.fake_llm --port-file PATH`` (prints the port, serves forever).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

FINAL_MARK = "FAKE-LLM-FINAL"
FINAL_TEXT = f"All scripted steps are done. {FINAL_MARK}"
PLAIN_TEXT = "OK."
FILE_NAME = "hello.txt"
FILE_TEXT = "hello from fake llm\nline two\n"
EDIT_OLD = "line two"
EDIT_NEW = "line two (edited)"
EDITED_TEXT = FILE_TEXT.replace(EDIT_OLD, EDIT_NEW)
SHELL_COMMAND = "echo fake-shell-ok"
SHELL_OUTPUT = "fake-shell-ok"
TOUCH_NAME = "touched.txt"
SLOW_SECONDS = 20.0
SLOW_TICK = 0.5

DIRECTIVE = re.compile(r"\[scenario:([a-z_,]*)(?:\s+dir=([^\]\s]+))?\]")
ACTIONS = ("plan", "write", "edit", "read", "shell", "touch", "text", "slow")

# Tool names per action, most specific first; the first one the agent offers wins.
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "plan": ("TodoWrite", "todowrite", "write_todos", "update_plan"),
    "write": ("mcp__acp__Write", "Write", "write", "write_file"),
    "edit": ("mcp__acp__Edit", "Edit", "edit", "replace", "edit_file"),
    "read": ("mcp__acp__Read", "Read", "read", "read_file"),
    "shell": ("mcp__acp__Bash", "Bash", "bash", "run_shell_command", "shell", "exec_command"),
}
TOOL_NAMES["touch"] = TOOL_NAMES["shell"]

PATH_KEYS = ("file_path", "absolute_path", "filePath", "path", "file", "filename")
CONTENT_KEYS = ("content", "contents", "file_text", "text")
OLD_KEYS = ("old_string", "oldString", "old_str", "old_text", "oldText")
NEW_KEYS = ("new_string", "newString", "new_str", "new_text", "newText")
COMMAND_KEYS = ("command", "cmd")
PLAN_ENTRIES = (("Write the file", "in_progress"), ("Run a command", "pending"))


# ---- the script -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Directive:
    actions: list[str]
    think: bool
    directory: str | None

    @classmethod
    def find(cls, text: str) -> Directive | None:
        matches = list(DIRECTIVE.finditer(text))
        if not matches:
            return None
        match = matches[-1]  # the last directive in the text counts
        names = [w for w in match.group(1).split(",") if w]
        return cls([w for w in names if w in ACTIONS], "think" in names, match.group(2))


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Reply:
    """One model answer: optional reasoning, text, and at most one tool call."""

    thinking: str | None = None
    text: str = ""
    call: ToolCall | None = None
    slow: bool = False
    note: str = ""  # for the request log


def next_reply(directive: Directive | None, calls_done: int, tools: dict[str, dict[str, Any]]) -> Reply:
    """What to answer, given the directive, the tool calls made since it, and the offered tools."""
    if directive is None or not tools:
        return Reply(text=FINAL_TEXT if directive is not None else PLAIN_TEXT, note="plain")
    pending = [a for a in directive.actions if a != "text"]
    step = calls_done + 1
    thinking = f"Thinking about step {step}." if directive.think else None
    if "slow" in pending:
        return Reply(thinking=thinking, text="Working slowly...", slow=True, note="slow")
    if calls_done >= len(pending):
        final_thought = "Thinking about the final answer." if directive.think else None
        return Reply(thinking=final_thought, text=FINAL_TEXT, note="final")
    action = pending[calls_done]
    call = tool_call_for(action, directive.directory or ".", tools)
    if call is None:
        return Reply(thinking=thinking, text=f"Step {step}: no tool for {action}. {FINAL_TEXT}", note="no-tool")
    return Reply(thinking=thinking, text=f"Step {step}: {action}.", call=call, note=action)


def tool_call_for(action: str, directory: str, tools: dict[str, dict[str, Any]]) -> ToolCall | None:
    base = directory.rstrip("/")
    target = f"{base}/{FILE_NAME}"
    values: dict[str, Any] = {
        "write": {"path": target, "content": FILE_TEXT},
        "edit": {"path": target, "old": EDIT_OLD, "new": EDIT_NEW},
        "read": {"path": target},
        "shell": {"command": SHELL_COMMAND},
        "touch": {"command": f"touch {base}/{TOUCH_NAME}"},
    }.get(action, {})
    name = next((n for n in TOOL_NAMES.get(action, ()) if n in tools), None)
    if name is None and action == "read":  # no read tool: read through the shell
        name = next((n for n in TOOL_NAMES["shell"] if n in tools), None)
        values = {"command": f"cat {target}"}
    if name is None:
        return None
    if action == "plan":
        return ToolCall(name, plan_arguments(tools[name]))
    return ToolCall(name, fill_arguments(tools[name], values))


# ---- arguments from JSON schemas ------------------------------------------------------------------
def _props(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _type(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        return kind.lower()  # Gemini spells types in capitals
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            found = _type(option)
            if found and found != "null":
                return found
    return None


def placeholder(name: str, schema: Any) -> Any:
    """A valid value for a required field the script has no meaning for."""
    if isinstance(schema, dict):
        if "default" in schema:
            return schema["default"]
        if schema.get("enum"):
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
    kind = _type(schema)
    if kind in ("integer", "number"):
        value = 60000 if "timeout" in name.lower() else 1
        if isinstance(schema, dict):
            low, high = schema.get("minimum"), schema.get("maximum")
            if isinstance(high, int | float) and value > high:
                value = high
            if isinstance(low, int | float) and value < low:
                value = low
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "Run a scripted command" if name == "description" else "scripted"


def fill_arguments(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Map the script's values onto the schema's property names, then fill other required fields."""
    props = _props(schema)
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    args: dict[str, Any] = {}
    keys_for = {"path": PATH_KEYS, "content": CONTENT_KEYS, "old": OLD_KEYS, "new": NEW_KEYS, "command": COMMAND_KEYS}
    for meaning, value in values.items():
        key = next((k for k in keys_for[meaning] if k in props), None)
        if key is None and not props:
            key = keys_for[meaning][0]
        if key is None:
            continue
        if _type(props.get(key)) == "array" and meaning == "command":
            value = ["bash", "-lc", value]
        args[key] = value
    if "description" in props and "description" not in args and "command" in values:
        args["description"] = "Run a scripted command"
    for key in required:
        if key not in args:
            args[key] = placeholder(key, props.get(key))
    return args


def plan_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    props = _props(schema)
    list_key = next((k for k, v in props.items() if _type(v) == "array"), "todos")
    item_schema = props.get(list_key, {}).get("items", {}) if isinstance(props.get(list_key), dict) else {}
    item_props = _props(item_schema) if isinstance(item_schema, dict) else {}
    item_required = item_schema.get("required") or [] if isinstance(item_schema, dict) else []
    entries = []
    for index, (text, status) in enumerate(PLAN_ENTRIES, start=1):
        entry: dict[str, Any] = {}
        for key, prop in item_props.items():
            if key in ("content", "step", "description", "text", "title", "task"):
                entry[key] = text
            elif key == "activeForm":
                entry[key] = text.replace("Write", "Writing").replace("Run", "Running")
            elif key == "status":
                allowed = prop.get("enum") if isinstance(prop, dict) else None
                entry[key] = status if not allowed or status in allowed else allowed[0]
            elif key == "priority":
                allowed = prop.get("enum") if isinstance(prop, dict) else None
                entry[key] = "medium" if not allowed or "medium" in allowed else allowed[0]
            elif key == "id":
                entry[key] = str(index)
        for key in item_required:
            entry.setdefault(key, placeholder(key, item_props.get(key)))
        if not item_props:
            entry = {"content": text, "status": status}
        entries.append(entry)
    args: dict[str, Any] = {list_key: entries}
    for key in schema.get("required") or []:
        if key not in args:
            args[key] = placeholder(key, props.get(key))
    return args


def words(text: str) -> list[str]:
    """Split into stream pieces that join back to the exact text."""
    return re.findall(r"\S+\s*|\s+", text) or [""]


# ---- the HTTP side --------------------------------------------------------------------------------
@dataclass
class RequestLog:
    """One JSON line per model request: what was offered and what was answered."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.entries.append(entry)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")


class ClientGone(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the request log says enough
        pass

    # ---- plumbing ----
    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        return body if isinstance(body, dict) else {}

    def _json(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ClientGone from exc

    def _event(self, payload: Any, name: str | None = None) -> None:
        head = f"event: {name}\n" if name else ""
        self._chunk(f"{head}data: {json.dumps(payload)}\n\n".encode())

    def _end_sse(self) -> None:
        self._chunk(b"")

    # ---- routing ----
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path.rstrip("/").endswith("/models"):
            self._json({"data": [{"id": "fake-model", "object": "model"}], "models": []})
        else:
            self._json({"error": {"message": f"no route {path}"}}, 404)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        try:
            if path.endswith("/messages/count_tokens"):
                self._json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
            elif path.endswith("/messages"):
                self._anthropic(body)
            elif ":countTokens" in path:
                self._json({"totalTokens": max(1, len(json.dumps(body)) // 4)})
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                self._gemini(body, stream=":streamGenerateContent" in path)
            else:
                self._json({"error": {"message": f"no route {path}"}}, 404)
        except ClientGone:
            self.close_connection = True

    def _record(self, api: str, tools: dict[str, Any], calls_done: int, reply: Reply, last_result: str = "") -> None:
        self.server.log.add(
            {
                "api": api,
                "tools": sorted(tools),
                "calls_done": calls_done,
                # What the agent reported back for its newest tool call: proof that the tool ran.
                "last_result": last_result[:2000],
                "reply": reply.note,
                "tool": reply.call.name if reply.call else None,
                "arguments": reply.call.arguments if reply.call else None,
            }
        )

    def _slow_ticks(self, emit: Callable[[str], None]) -> None:
        deadline = time.monotonic() + SLOW_SECONDS
        tick = 0
        while time.monotonic() < deadline:
            emit(f" tick{tick}")  # raises ClientGone once the agent hangs up (cancel)
            tick += 1
            time.sleep(SLOW_TICK)

    # ---- Anthropic Messages ----
    def _anthropic(self, body: dict[str, Any]) -> None:
        tools = {
            t["name"]: t.get("input_schema") or {}
            for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        }
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        directive, calls_done = None, 0
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user":
                directive = Directive.find(_anthropic_text(messages[index]))
                if directive is not None:
                    calls_done = sum(
                        1
                        for m in messages[index + 1 :]
                        if m.get("role") == "assistant"
                        for block in _blocks(m)
                        if block.get("type") == "tool_use"
                    )
                    break
        reply = next_reply(directive, calls_done, tools)
        self._record("anthropic", tools, calls_done, reply, _anthropic_last_result(messages))
        total_calls = sum(1 for m in messages for b in _blocks(m) if b.get("type") == "tool_use")
        call_id = f"toolu_fake_{total_calls + 1:03d}"
        message_id = f"msg_fake_{len(messages):03d}"
        model = body.get("model") or "fake-model"
        stop_reason = "tool_use" if reply.call else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            content: list[dict[str, Any]] = []
            if reply.thinking:
                content.append({"type": "thinking", "thinking": reply.thinking, "signature": "fake-signature"})
            if reply.text:
                content.append({"type": "text", "text": reply.text})
            if reply.call:
                call = reply.call
                content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments})
            self._json(
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
            return
        self._start_sse()
        start = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        self._event({"type": "message_start", "message": start}, "message_start")
        index = 0

        def block(kind: dict[str, Any], deltas: Iterator[dict[str, Any]]) -> None:
            nonlocal index
            self._event({"type": "content_block_start", "index": index, "content_block": kind}, "content_block_start")
            for delta in deltas:
                self._event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            self._event({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1

        if reply.thinking:
            pieces = [{"type": "thinking_delta", "thinking": w} for w in words(reply.thinking)]
            block(
                {"type": "thinking", "thinking": "", "signature": ""},
                iter([*pieces, {"type": "signature_delta", "signature": "fake-signature"}]),
            )
        if reply.text:
            text_block = {"type": "text", "text": ""}
            if reply.slow:
                self._event(
                    {"type": "content_block_start", "index": index, "content_block": text_block}, "content_block_start"
                )
                for piece in words(reply.text):
                    self._event(
                        {"type": "content_block_delta", "index": index, "delta": _text_delta(piece)},
                        "content_block_delta",
                    )
                self._slow_ticks(
                    lambda tick: self._event(
                        {"type": "content_block_delta", "index": index, "delta": _text_delta(tick)},
                        "content_block_delta",
                    )
                )
                self._event({"type": "content_block_stop", "index": index}, "content_block_stop")
                index += 1
            else:
                block(text_block, iter(_text_delta(w) for w in words(reply.text)))
        if reply.call:
            arguments = json.dumps(reply.call.arguments)
            half = len(arguments) // 2
            block(
                {"type": "tool_use", "id": call_id, "name": reply.call.name, "input": {}},
                iter(
                    {"type": "input_json_delta", "partial_json": part} for part in (arguments[:half], arguments[half:])
                ),
            )
        self._event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            "message_delta",
        )
        self._event({"type": "message_stop"}, "message_stop")
        self._end_sse()

    # ---- Gemini ----
    def _gemini(self, body: dict[str, Any], *, stream: bool) -> None:
        tools: dict[str, dict[str, Any]] = {}
        for group in body.get("tools") or []:
            for decl in (group or {}).get("functionDeclarations") or []:
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    tools[decl["name"]] = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        if schema and not tools:  # a side question that wants JSON back (e.g. who speaks next)
            reply = Reply(text=json.dumps(schema_answer(schema)), note="json")
            self._record("gemini", tools, 0, reply)
            parts: list[dict[str, Any]] = [{"text": reply.text}]
            self._gemini_answer(parts, stream)
            return
        directive, calls_done = None, 0
        for index in range(len(contents) - 1, -1, -1):
            content = contents[index]
            if content.get("role", "user") == "user":
                text = " ".join(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))
                directive = Directive.find(text)
                if directive is not None:
                    calls_done = sum(
                        1
                        for c in contents[index + 1 :]
                        if c.get("role") == "model"
                        for p in c.get("parts") or []
                        if isinstance(p, dict) and "functionCall" in p
                    )
                    break
        reply = next_reply(directive, calls_done, tools)
        self._record("gemini", tools, calls_done, reply, _gemini_last_result(contents))
        parts = []
        if reply.thinking:
            parts.append({"text": reply.thinking, "thought": True})
        if reply.text:
            parts.append({"text": reply.text})
        if reply.call:
            parts.append({"functionCall": {"name": reply.call.name, "args": reply.call.arguments}})
        if reply.slow and stream:
            self._start_sse()
            self._gemini_chunk(parts, finish=None)
            self._slow_ticks(lambda tick: self._gemini_chunk([{"text": tick}], finish=None))
            self._gemini_chunk([{"text": ""}], finish="STOP")
            self._end_sse()
            return
        self._gemini_answer(parts, stream)

    def _gemini_answer(self, parts: list[dict[str, Any]], stream: bool) -> None:
        if not stream:
            self._json(_gemini_payload(parts, "STOP"))
            return
        self._start_sse()
        # Text is streamed word by word; thoughts and calls go whole.
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if "text" in part and not part.get("thought"):
                pieces = words(part["text"])
                for n, piece in enumerate(pieces):
                    finish = "STOP" if last and n == len(pieces) - 1 else None
                    self._gemini_chunk([{"text": piece}], finish=finish)
            else:
                self._gemini_chunk([part], finish="STOP" if last else None)
        self._end_sse()

    def _gemini_chunk(self, parts: list[dict[str, Any]], finish: str | None) -> None:
        self._chunk(f"data: {json.dumps(_gemini_payload(parts, finish))}\r\n\r\n".encode())


def _gemini_payload(parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "fake-model",
    }


def schema_answer(schema: Any, name: str = "") -> Any:
    """A value shaped like ``schema``; for enums, "user" when allowed (ends a who-speaks-next check)."""
    if not isinstance(schema, dict):
        return "scripted"
    enum = schema.get("enum")
    if enum:
        return "user" if "user" in enum else enum[0]
    kind = _type(schema)
    if kind == "object":
        return {key: schema_answer(prop, key) for key, prop in _props(schema).items()}
    if kind == "array":
        return []
    return placeholder(name, schema)


def _text_delta(text: str) -> dict[str, Any]:
    return {"type": "text_delta", "text": text}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _anthropic_last_result(messages: list[dict[str, Any]]) -> str:
    if not messages or messages[-1].get("role") != "user":
        return ""
    texts = []
    for block in _blocks(messages[-1]):
        if block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [b.get("text", "") for b in content if isinstance(b, dict)]
    return "\n".join(texts)


def _gemini_last_result(contents: list[dict[str, Any]]) -> str:
    if not contents:
        return ""
    responses = [p["functionResponse"] for p in contents[-1].get("parts") or [] if "functionResponse" in p]
    return json.dumps(responses) if responses else ""


def _anthropic_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in _blocks(message) if b.get("type") == "text")


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, log_path: Path | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.log = RequestLog(path=log_path)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", type=Path, help="write the chosen port here")
    parser.add_argument("--log", type=Path, help="append one JSON line per model request here")
    args = parser.parse_args(argv)
    server = FakeLLMServer(args.log)
    if args.port_file:
        args.port_file.write_text(str(server.port))
    print(server.port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main(sys.argv[1:])
