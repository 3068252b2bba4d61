"""A scripted stand-in for hosted model APIs, so real coding agents run offline on 127.0.0.1.

Stdlib only. One ``ThreadingHTTPServer`` answers, streamed as SSE or as plain JSON:

- Anthropic Messages: ``POST /v1/messages`` (+ ``/v1/messages/count_tokens``) — Claude adapters
- Gemini: ``POST /v1beta/models/<model>:streamGenerateContent`` / ``:generateContent`` / ``:countTokens``
- OpenAI chat completions: ``POST /v1/chat/completions`` — opencode (openai-compatible provider)
- OpenAI Responses: ``POST /v1/responses`` — codex (its WebSocket upgrade is refused with 426, so it
  falls back to plain HTTP at once); ``apply_patch`` as a freeform (custom) or a function tool

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
# Ten lines, the edited one in the middle: a diff's hunk is neither the whole file nor at its start.
FILE_TEXT = "hello from fake llm\nalpha\nbravo\ncharlie\ndelta\nline two\necho\nfoxtrot\ngolf\nhotel\n"
EDIT_OLD = "line two"
EDIT_NEW = "line two (edited)"
EDITED_TEXT = FILE_TEXT.replace(EDIT_OLD, EDIT_NEW)
# `rewrite` writes the whole file again over the edited one: a line changed, one added.
REWRITTEN_TEXT = EDITED_TEXT.replace("golf\n", "golf (rewritten)\n") + "india\n"
SHELL_COMMAND = "echo fake-shell-ok"
SHELL_OUTPUT = "fake-shell-ok"
TOUCH_NAME = "touched.txt"
SLOW_SECONDS = 20.0
SLOW_TICK = 0.5

DIRECTIVE = re.compile(r"\[scenario:([a-z_,]*)(?:\s+dir=([^\]\s]+))?\]")
ACTIONS = ("plan", "write", "edit", "rewrite", "read", "shell", "touch", "text", "slow")

# Tool names per action, most specific first; the first one the agent offers wins.
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "plan": ("TodoWrite", "todowrite", "write_todos", "update_plan"),
    "write": ("mcp__acp__Write", "Write", "write", "write_file", "apply_patch"),
    "edit": ("mcp__acp__Edit", "Edit", "edit", "replace", "edit_file", "apply_patch"),
    "read": ("mcp__acp__Read", "Read", "read", "read_file"),
    "shell": ("mcp__acp__Bash", "Bash", "bash", "run_shell_command", "shell", "exec_command"),
}
TOOL_NAMES["touch"] = TOOL_NAMES["shell"]
TOOL_NAMES["rewrite"] = TOOL_NAMES["write"]

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
        "rewrite": {"path": target, "content": REWRITTEN_TEXT},
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
    if name == "apply_patch":
        return ToolCall(name, {"input": apply_patch_text(action, target)})
    return ToolCall(name, fill_arguments(tools[name], values))


CODE_MODE_TOOL = "exec"
_NESTED = re.compile(r"^### `([A-Za-z0-9_]+)`", re.MULTILINE)


def code_mode_tools(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """The tools nested in codex's code-mode ``exec`` (``additional_tools`` input items), each with
    the schema the script's arguments are filled from; None when the request is not in code mode."""
    for item in items:
        if item.get("type") != "additional_tools":
            continue
        stack = list(item.get("tools") or [])
        while stack:
            tool = stack.pop()
            if not isinstance(tool, dict):
                continue
            stack.extend(tool.get("tools") or [])
            if tool.get("type") == "custom" and tool.get("name") == CODE_MODE_TOOL:
                names = _NESTED.findall(str(tool.get("description") or ""))
                return {name: _NESTED_SCHEMAS.get(name, {}) for name in names}
    return None


# The nested tools' arguments, as their TypeScript declarations in the description give them.
_NESTED_SCHEMAS: dict[str, dict[str, Any]] = {
    "exec_command": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}


def code_mode_source(call: ToolCall) -> str:
    """The JavaScript that makes ``call`` from inside ``exec`` and returns its output as text."""
    argument = call.arguments.get("input") if call.name == "apply_patch" else call.arguments
    return (
        f"const result = await tools.{call.name}({json.dumps(argument)});\n"
        'text(typeof result === "string" ? result : result.output ?? JSON.stringify(result));\n'
    )


def apply_patch_text(action: str, target: str) -> str:
    """codex's patch language: add the file, or change its second line."""
    if action == "write":
        body = "".join(f"+{line}\n" for line in FILE_TEXT.splitlines())
        return f"*** Begin Patch\n*** Add File: {target}\n{body}*** End Patch\n"
    if action == "rewrite":  # every line replaced
        old = "".join(f"-{line}\n" for line in EDITED_TEXT.splitlines())
        new = "".join(f"+{line}\n" for line in REWRITTEN_TEXT.splitlines())
        return f"*** Begin Patch\n*** Update File: {target}\n@@\n{old}{new}*** End Patch\n"
    lines = FILE_TEXT.splitlines()
    before = lines[lines.index(EDIT_OLD) - 1]
    return f"*** Begin Patch\n*** Update File: {target}\n@@\n {before}\n-{EDIT_OLD}\n+{EDIT_NEW}\n*** End Patch\n"


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
        value: float = 60000 if "timeout" in name.lower() else 1
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


# What each answer reports as used, in every provider's own fields (a side call without tools reports
# nothing, so an agent's sum is the same whether it counts those): tests compare the agents' counts
# with these.
TOKENS_IN = 120  # input not read from a cache
TOKENS_CACHED = 30  # input read from a cache
TOKENS_CACHE_WRITE = 7  # input written to a cache (Anthropic)
TOKENS_OUT = 45  # output
TOKENS_THOUGHT = 11  # thoughts (reasoning), when the answer thinks


def usage_for(api: str, reply: Reply, tools: dict[str, Any]) -> dict[str, Any]:
    """The usage block of one answer, as ``api`` reports it."""
    on = 1 if tools else 0
    fresh, cached, write, out = TOKENS_IN * on, TOKENS_CACHED * on, TOKENS_CACHE_WRITE * on, TOKENS_OUT * on
    thought = TOKENS_THOUGHT * on if reply.thinking else 0
    if api == "anthropic":  # input_tokens leaves out the cache; thinking is part of the output
        return {
            "input_tokens": fresh,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": cached,
            "output_tokens": out,
        }
    if api == "chat":  # OpenAI: prompt_tokens includes the cached ones, completion_tokens the reasoning
        return {
            "prompt_tokens": fresh + cached,
            "completion_tokens": out,
            "total_tokens": fresh + cached + out,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": thought},
        }
    if api == "responses":
        return {
            "input_tokens": fresh + cached,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": thought},
            "total_tokens": fresh + cached + out,
        }
    # Gemini: the thoughts are counted beside the candidates
    return {
        "promptTokenCount": fresh + cached,
        "cachedContentTokenCount": cached,
        "candidatesTokenCount": out,
        "thoughtsTokenCount": thought,
        "totalTokenCount": fresh + cached + out + thought,
    }


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
    path_model: str | None = None

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
        if self.headers.get("upgrade", "").lower() == "websocket":
            self._json({"error": {"message": "websockets are not served here"}}, 426)
        elif path.rstrip("/").endswith("/models"):
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
        # Gemini names the model in the path (/v1beta/models/<model>:streamGenerateContent).
        self.path_model = path.rsplit("/models/", 1)[-1].split(":", 1)[0] if "/models/" in path else None
        try:
            if path.endswith("/messages/count_tokens"):
                self._json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
            elif path.endswith("/messages"):
                self._anthropic(body)
            elif ":countTokens" in path:
                self._json({"totalTokens": max(1, len(json.dumps(body)) // 4)})
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                self._gemini(body, stream=":streamGenerateContent" in path)
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif path.endswith("/responses"):
                self._responses(body)
            else:
                self._json({"error": {"message": f"no route {path}"}}, 404)
        except ClientGone:
            self.close_connection = True

    def _record(
        self,
        api: str,
        tools: dict[str, Any],
        calls_done: int,
        reply: Reply,
        last_result: str = "",
        body: dict[str, Any] | None = None,
        prompt: str = "",
        usage: dict[str, Any] | None = None,
    ) -> None:
        body = body or {}
        reasoning = body.get("reasoning")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else body.get("reasoning_effort")
        self.server.log.add(
            {
                "api": api,
                "prompt": prompt[:500],  # the user message holding the directive
                "model": body.get("model") or self.path_model,
                "effort": effort,
                "tools": sorted(tools),
                "calls_done": calls_done,
                # What the agent reported back for its newest tool call: proof that the tool ran.
                "last_result": last_result[:2000],
                "reply": reply.note,
                "tool": reply.call.name if reply.call else None,
                "arguments": reply.call.arguments if reply.call else None,
                # Every user message the request carries: the conversation the agent remembers.
                "user_texts": [text[:300] for text in user_texts(api, body)],
                "usage": usage,  # what the answer reported, in the API's own fields
                # A helper of the agent's own (codex's auto-review risk classifier), not its conversation.
                "subagent": self.headers.get("x-openai-subagent") or _classifier(body),
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
        directive, calls_done, prompt = None, 0, ""
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user":
                directive = Directive.find(prompt := _anthropic_text(messages[index]))
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
        usage = usage_for("anthropic", reply, tools)
        last = _anthropic_last_result(messages)
        self._record("anthropic", tools, calls_done, reply, last, body, prompt, usage)
        total_calls = sum(1 for m in messages for b in _blocks(m) if b.get("type") == "tool_use")
        call_id = f"toolu_fake_{total_calls + 1:03d}"
        message_id = f"msg_fake_{len(messages):03d}"
        model = body.get("model") or "fake-model"
        stop_reason = "tool_use" if reply.call else "end_turn"
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
        start: dict[str, Any] = {
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
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
        self._event({"type": "message_stop"}, "message_stop")
        self._end_sse()

    # ---- OpenAI chat completions ----
    def _chat(self, body: dict[str, Any]) -> None:
        tools: dict[str, dict[str, Any]] = {}
        for tool in body.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                tools[function["name"]] = function.get("parameters") or {}
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        directive, calls_done, prompt = None, 0, ""
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user":
                directive = Directive.find(prompt := _chat_text(messages[index]))
                if directive is not None:
                    calls_done = sum(len(m.get("tool_calls") or []) for m in messages[index + 1 :])
                    break
        reply = next_reply(directive, calls_done, tools)
        last = "\n".join(_chat_text(m) for m in reversed(messages) if m.get("role") == "tool")[:2000]
        usage = usage_for("chat", reply, tools)
        self._record("chat", tools, calls_done, reply, last, body, prompt, usage)
        total_calls = sum(len(m.get("tool_calls") or []) for m in messages)
        call_id = f"call_fake_{total_calls + 1:03d}"
        model = body.get("model") or "fake-model"
        finish = "tool_calls" if reply.call else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if reply.thinking:
                message["reasoning_content"] = reply.thinking
            if reply.call:
                arguments = json.dumps(reply.call.arguments)
                function = {"name": reply.call.name, "arguments": arguments}
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._json(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                }
            )
            return
        self._start_sse()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            payload = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
            self._event({**payload, "choices": [choice]})

        chunk({"role": "assistant", "content": ""})
        if reply.thinking:
            for piece in words(reply.thinking):
                chunk({"reasoning_content": piece})
        for piece in words(reply.text) if reply.text else []:
            chunk({"content": piece})
        if reply.slow:
            self._slow_ticks(lambda tick: chunk({"content": tick}))
        if reply.call:
            arguments = json.dumps(reply.call.arguments)
            half = len(arguments) // 2
            head = {
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": reply.call.name, "arguments": ""},
            }
            chunk({"tool_calls": [head]})
            for part in (arguments[:half], arguments[half:]):
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        chunk({}, finish)
        self._event(
            {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage}
        )
        self._chunk(b"data: [DONE]\n\n")
        self._end_sse()

    # ---- OpenAI Responses ----
    def _responses(self, body: dict[str, Any]) -> None:
        tools: dict[str, dict[str, Any]] = {}
        custom: set[str] = set()
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if tool.get("type") == "local_shell":
                name = "local_shell"
            if isinstance(name, str):
                tools[name] = tool.get("parameters") or {}
                if tool.get("type") == "custom":
                    custom.add(name)
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        # codex's default model runs tools from JavaScript: its only tool is a custom `exec`, offered
        # in an `additional_tools` input item, whose description lists the nested tools.
        nested = code_mode_tools(items) if not tools else None
        if nested:
            tools = nested
        directive, calls_done, prompt = None, 0, ""
        call_types = ("function_call", "custom_tool_call", "local_shell_call")
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if item.get("type", "message") == "message" and item.get("role") == "user":
                directive = Directive.find(prompt := _responses_text(item))
                if directive is not None:
                    calls_done = sum(1 for i in items[index + 1 :] if i.get("type") in call_types)
                    break
        reply = next_reply(directive, calls_done, tools)
        if nested and reply.call is not None:
            reply.call = ToolCall(CODE_MODE_TOOL, {"input": code_mode_source(reply.call)})
            custom.add(CODE_MODE_TOOL)
        outputs = [i for i in items if str(i.get("type", "")).endswith("_output")]
        last = _output_text(outputs[-1].get("output")) if outputs and items and items[-1] is outputs[-1] else ""
        usage = usage_for("responses", reply, tools)
        self._record("responses", tools, calls_done, reply, last, body, prompt, usage)
        total_calls = sum(1 for i in items if i.get("type") in call_types)
        number = total_calls + 1
        response_id = f"resp_fake_{len(items):03d}"
        model = body.get("model") or "fake-model"
        self._start_sse()
        sequence = 0

        def event(payload: dict[str, Any]) -> None:
            nonlocal sequence
            sequence += 1
            self._event({**payload, "sequence_number": sequence}, payload["type"])

        response: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "status": "in_progress",
            "model": model,
            "output": [],
        }
        event({"type": "response.created", "response": response})
        output: list[dict[str, Any]] = []
        index = 0
        if reply.thinking:
            item_id = f"rs_fake_{number:03d}"
            event(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {"type": "reasoning", "id": item_id, "summary": []},
                }
            )
            for piece in words(reply.thinking):
                event(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "summary_index": 0,
                        "delta": piece,
                    }
                )
            done = {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": reply.thinking}]}
            event({"type": "response.output_item.done", "output_index": index, "item": done})
            output.append(done)
            index += 1
        if reply.text:
            item_id = f"msg_fake_{number:03d}"
            added = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
            event({"type": "response.output_item.added", "output_index": index, "item": added})
            text = reply.text

            def text_delta(piece: str) -> None:
                event(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "delta": piece,
                    }
                )

            for piece in words(reply.text):
                text_delta(piece)
            if reply.slow:
                ticks: list[str] = []

                def tick(piece: str) -> None:
                    ticks.append(piece)
                    text_delta(piece)

                self._slow_ticks(tick)
                text += "".join(ticks)
            content = [{"type": "output_text", "text": text, "annotations": []}]
            done = {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": content}
            event({"type": "response.output_item.done", "output_index": index, "item": done})
            output.append(done)
            index += 1
        if reply.call:
            call_id = f"call_fake_{number:03d}"
            name = reply.call.name
            if name in custom:
                done = {
                    "type": "custom_tool_call",
                    "id": f"ctc_fake_{number:03d}",
                    "call_id": call_id,
                    "name": name,
                    "input": reply.call.arguments.get("input", ""),
                    "status": "completed",
                }
            else:
                arguments = json.dumps(reply.call.arguments)
                done = {
                    "type": "function_call",
                    "id": f"fc_fake_{number:03d}",
                    "call_id": call_id,
                    "name": name,
                    "arguments": arguments,
                    "status": "completed",
                }
            event({"type": "response.output_item.added", "output_index": index, "item": done})
            event({"type": "response.output_item.done", "output_index": index, "item": done})
            output.append(done)
        event(
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": output, "usage": usage},
            }
        )
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
            usage = usage_for("gemini", reply, tools)
            self._record("gemini", tools, 0, reply, usage=usage)
            parts: list[dict[str, Any]] = [{"text": reply.text}]
            self._gemini_answer(parts, stream, usage)
            return
        directive, calls_done, prompt = None, 0, ""
        for index in range(len(contents) - 1, -1, -1):
            content = contents[index]
            if content.get("role", "user") == "user":
                text = " ".join(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))
                directive = Directive.find(prompt := text)
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
        usage = usage_for("gemini", reply, tools)
        self._record("gemini", tools, calls_done, reply, _gemini_last_result(contents), body, prompt, usage)
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
            self._gemini_chunk([{"text": ""}], finish="STOP", usage=usage)
            self._end_sse()
            return
        self._gemini_answer(parts, stream, usage)

    def _gemini_answer(self, parts: list[dict[str, Any]], stream: bool, usage: dict[str, Any]) -> None:
        if not stream:
            self._json(_gemini_payload(parts, "STOP", usage))
            return
        self._start_sse()
        # Text is streamed word by word; thoughts and calls go whole.
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if "text" in part and not part.get("thought"):
                pieces = words(part["text"])
                for n, piece in enumerate(pieces):
                    finish = "STOP" if last and n == len(pieces) - 1 else None
                    self._gemini_chunk([{"text": piece}], finish=finish, usage=usage if finish else None)
            else:
                self._gemini_chunk([part], finish="STOP" if last else None, usage=usage if last else None)
        self._end_sse()

    def _gemini_chunk(
        self, parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any] | None = None
    ) -> None:
        self._chunk(f"data: {json.dumps(_gemini_payload(parts, finish, usage))}\r\n\r\n".encode())


def _gemini_payload(parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any] | None) -> dict[str, Any]:
    """One answer (or streamed piece); the usage comes with the last piece, as Gemini sends it."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    payload: dict[str, Any] = {"candidates": [candidate], "modelVersion": "fake-model"}
    if usage is not None:
        payload["usageMetadata"] = usage
    return payload


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


def _classifier(body: dict[str, Any]) -> str | None:
    """codex's auto-review asks its model for a risk classification: a helper, not the conversation."""
    instructions = body.get("instructions")
    if isinstance(instructions, str) and "entire classification" in instructions:
        return "classifier"
    return None


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


def _chat_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _responses_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return " ".join(p.get("text", "") for p in output if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(output, dict):
        return json.dumps(output)
    return ""


def user_texts(api: str, body: dict[str, Any]) -> list[str]:
    """The text of every user message in a request body of ``api``, oldest first."""
    if api == "responses":
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        return [_responses_text(i) for i in items if i.get("type", "message") == "message" and i.get("role") == "user"]
    if api == "gemini":
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        return [
            " ".join(p.get("text", "") for p in c.get("parts") or [] if isinstance(p, dict))
            for c in contents
            if c.get("role", "user") == "user"
        ]
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return [_anthropic_text(m) if api == "anthropic" else _chat_text(m) for m in messages]


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

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # an agent hanging up mid-answer (cancel, a refused upgrade) is part of the script

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
