"""Mock commands that work on files and terminals through the client (ACP ``fs/*`` and
``terminal/*``), reporting what happened as tool calls and an assistant message:

- ``read <path> [<line> [<limit>]]``: ``fs/read_text_file``
- ``write <path> <text>``: ``fs/write_text_file`` (reads the old text first, for the diff)
- ``edit <path> <old> => <new>``: the first ``<old>`` replaced by the agent itself (not through the
  client, as claude's own tools do); its diff shows only the two snippets, trimmed (as claude's does)
- ``run [--timeout=<seconds>] <shell command>``: ``terminal/create``, wait (or poll and kill at the
  timeout), ``terminal/output``, ``terminal/release``
- ``spawn <shell command>``: ``terminal/create``, report the first output, leave it running

Relative paths are taken from the session's working directory (ACP paths are absolute).
"""

from __future__ import annotations

import os
import time
from typing import Any

from .script import Context, Script, Step, say, update

POLL_SECONDS = 0.02
SPAWN_WAIT_SECONDS = 10.0


def _offers(ctx: Context, *path: str) -> bool:
    caps: Any = ctx.agent.client_capabilities if ctx.agent is not None else {}
    for key in path:
        caps = caps.get(key) if isinstance(caps, dict) else None
    return caps is True


def _absolute(ctx: Context, path: str) -> str:
    return os.path.normpath(os.path.join(ctx.session.get("cwd") or os.getcwd(), os.path.expanduser(path)))


def _error(result: Any) -> dict[str, Any] | None:
    if isinstance(result, dict) and isinstance(result.get("_error"), dict):
        return result["_error"]  # type: ignore[no-any-return]
    return None


def _text(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _tool_start(tool_id: str, title: str, kind: str, raw_input: dict[str, Any], **extra: Any) -> Step:
    return update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_id,
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": raw_input,
            **extra,
        }
    )


def _tool_update(tool_id: str, status: str, content: list[dict[str, Any]], **extra: Any) -> Step:
    payload = {"sessionUpdate": "tool_call_update", "toolCallId": tool_id, "status": status, "content": content}
    return update({**payload, **extra})


def _unsupported(ctx: Context, method: str) -> list[Step]:
    return say(ctx.id("unsupported"), f"The client does not offer {method}.")


def _usage(ctx: Context, text: str) -> list[Step]:
    return say(ctx.id("usage"), f"Usage: {text}")


def _failure(ctx: Context, tool_id: str, what: str, error: dict[str, Any]) -> list[Step]:
    text = f"{what} failed: {error.get('message')} ({error.get('code')})"
    return [_tool_update(tool_id, "failed", [_text(text)], rawOutput={"error": error}), *say(ctx.id("reply"), text)]


# ---- read --------------------------------------------------------------------------------------
def _read(ctx: Context) -> list[Step]:
    words = ctx.words
    if len(words) < 2 or not all(w.isdigit() for w in words[2:4]) or len(words) > 4:
        return _usage(ctx, "read <path> [<line> [<limit>]]")
    if not _offers(ctx, "fs", "readTextFile"):
        return _unsupported(ctx, "fs/read_text_file")
    path = _absolute(ctx, words[1])
    params: dict[str, Any] = {"path": path}
    if len(words) > 2:
        params["line"] = int(words[2])
    if len(words) > 3:
        params["limit"] = int(words[3])
    tool_id = ctx.id("read")

    def done(c: Context) -> list[Step]:
        result = c.saved["read"]
        error = _error(result)
        if error is not None:
            return _failure(c, tool_id, f"Reading {path}", error)
        content = result.get("content", "") if isinstance(result, dict) else ""
        return [
            _tool_update(tool_id, "completed", [_text(content)], rawOutput={"content": content}),
            *say(c.id("reply"), f"Contents of {path}:\n{content}"),
        ]

    return [
        _tool_start(tool_id, f"Read {path}", "read", params, locations=[{"path": path}]),
        _tool_update(tool_id, "in_progress", []),
        {"request": "fs/read_text_file", "params": params, "save": "read"},
        {"call": done},
    ]


# ---- write -------------------------------------------------------------------------------------
def _write(ctx: Context) -> list[Step]:
    parts = ctx.message.split(None, 2)
    if len(parts) < 3:
        return _usage(ctx, "write <path> <text>")
    if not _offers(ctx, "fs", "writeTextFile"):
        return _unsupported(ctx, "fs/write_text_file")
    path, text = _absolute(ctx, parts[1]), parts[2]
    tool_id = ctx.id("write")

    def written(c: Context) -> list[Step]:
        error = _error(c.saved["write"])
        if error is not None:
            return _failure(c, tool_id, f"Writing {path}", error)
        old = c.saved.get("old")
        old_text = old.get("content") if isinstance(old, dict) and _error(old) is None else None
        diff = {"type": "diff", "path": path, "oldText": old_text, "newText": text}
        return [
            _tool_update(tool_id, "completed", [diff]),
            *say(c.id("reply"), f"Wrote {len(text.encode('utf-8'))} bytes to {path}."),
        ]

    steps: list[Step] = [_tool_start(tool_id, f"Write {path}", "edit", {"path": path}, locations=[{"path": path}])]
    if _offers(ctx, "fs", "readTextFile"):
        steps.append({"request": "fs/read_text_file", "params": {"path": path}, "save": "old"})
    steps += [
        _tool_update(tool_id, "in_progress", []),
        {"request": "fs/write_text_file", "params": {"path": path, "content": text}, "save": "write"},
        {"call": written},
    ]
    return steps


# ---- edit --------------------------------------------------------------------------------------
def _edit(ctx: Context) -> list[Step]:
    """The agent's own change of a file (as claude's tools make them, not through the client), shown
    as a diff of the two snippets, trimmed (as claude shows them)."""
    parts = ctx.message.split(None, 2)
    old, arrow, new = parts[2].partition(" => ") if len(parts) == 3 else ("", "", "")
    if not arrow or not old:
        return _usage(ctx, "edit <path> <old> => <new>")
    path = _absolute(ctx, parts[1])
    tool_id = ctx.id("edit")
    diff = {"type": "diff", "path": path, "oldText": old.strip(), "newText": new.strip()}

    def change(c: Context) -> list[Step]:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if old not in text:
                raise ValueError("text not found")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text.replace(old, new, 1))
        except (OSError, ValueError) as exc:
            return _failure(c, tool_id, f"Editing {path}", {"message": str(exc), "code": -32603})
        return [_tool_update(tool_id, "completed", [diff]), *say(c.id("reply"), f"Edited {path}.")]

    return [
        _tool_start(tool_id, f"Edit {path}", "edit", {"path": path, "old": old, "new": new}, content=[diff]),
        {"call": change},
    ]


# ---- terminals ---------------------------------------------------------------------------------
def _poll(terminal_id: str, enough: Any, deadline: float, then: Any) -> list[Step]:
    """terminal/output until ``enough(result)`` or the deadline, then the steps of ``then(ctx)``."""

    def check(c: Context) -> list[Step]:
        result = c.saved.get("poll")
        if (isinstance(result, dict) and enough(result)) or _error(result) or time.monotonic() > deadline:
            return then(c)  # type: ignore[no-any-return]
        return [
            {"sleep": POLL_SECONDS},
            {"request": "terminal/output", "params": {"terminalId": terminal_id}, "save": "poll"},
            {"call": check},
        ]

    return [{"request": "terminal/output", "params": {"terminalId": terminal_id}, "save": "poll"}, {"call": check}]


def _describe_exit(status: Any) -> str:
    if not isinstance(status, dict):
        return "still running"
    if status.get("signal"):
        return f"killed by {status['signal']}"
    return f"exit code {status.get('exitCode')}"


def _run(ctx: Context) -> list[Step]:
    rest = ctx.message.split(None, 1)[1] if len(ctx.words) > 1 else ""
    timeout: float | None = None
    if rest.startswith("--timeout="):
        option, _, rest = rest.partition(" ")
        try:
            timeout = float(option.split("=", 1)[1])
        except ValueError:
            return _usage(ctx, "run [--timeout=<seconds>] <command>")
    command_line = rest.strip()
    if not command_line:
        return _usage(ctx, "run [--timeout=<seconds>] <command>")
    if not _offers(ctx, "terminal"):
        return _unsupported(ctx, "terminal/create")
    tool_id = ctx.id("run")

    def created(c: Context) -> list[Step]:
        result = c.saved["terminal"]
        error = _error(result)
        if error is not None:
            return _failure(c, tool_id, f"Running {command_line}", error)
        terminal_id = result["terminalId"]
        c.saved["terminal_id"] = terminal_id
        content = [{"type": "terminal", "terminalId": terminal_id}]
        ident = {"terminalId": terminal_id}
        finish: list[Step] = [
            {"request": "terminal/wait_for_exit", "params": ident, "save": "exit"},
            {"request": "terminal/output", "params": ident, "save": "output"},
            {"request": "terminal/release", "params": ident, "save": "release"},
            {"call": report},
        ]
        if timeout is None:
            return [_tool_update(tool_id, "in_progress", content), *finish]

        def after_poll(c2: Context) -> list[Step]:
            exited = isinstance(c2.saved.get("poll"), dict) and "exitStatus" in c2.saved["poll"]
            kill: list[Step] = [] if exited else [{"request": "terminal/kill", "params": ident, "save": "kill"}]
            return [*kill, *finish]

        deadline = time.monotonic() + timeout
        return [
            _tool_update(tool_id, "in_progress", content),
            *_poll(terminal_id, lambda r: "exitStatus" in r, deadline, after_poll),
        ]

    def report(c: Context) -> list[Step]:
        terminal_id = c.saved["terminal_id"]
        out = c.saved.get("output")
        output = out.get("output", "") if isinstance(out, dict) else ""
        status = c.saved.get("exit")
        ok = isinstance(status, dict) and status.get("exitCode") == 0
        # The output travels as terminal content only, as ACP intends: clients show it from the terminal.
        raw = {"exitStatus": status if _error(status) is None else None}
        content = [{"type": "terminal", "terminalId": terminal_id}]
        text = f"$ {command_line}\n{output}" + ("" if output.endswith("\n") or not output else "\n")
        text += f"[{_describe_exit(status)}]"
        return [
            _tool_update(tool_id, "completed" if ok else "failed", content, rawOutput=raw),
            *say(c.id("reply"), text),
        ]

    return [
        _tool_start(tool_id, f"Run {command_line}", "execute", {"command": command_line}),
        {"request": "terminal/create", "params": {"command": command_line}, "save": "terminal"},
        {"call": created},
    ]


def _spawn(ctx: Context) -> list[Step]:
    command_line = ctx.message.split(None, 1)[1].strip() if len(ctx.words) > 1 else ""
    if not command_line:
        return _usage(ctx, "spawn <command>")
    if not _offers(ctx, "terminal"):
        return _unsupported(ctx, "terminal/create")

    def created(c: Context) -> list[Step]:
        error = _error(c.saved["terminal"])
        if error is not None:
            return say(c.id("reply"), f"Starting {command_line} failed: {error.get('message')}")
        terminal_id = c.saved["terminal"]["terminalId"]

        def running(c2: Context) -> list[Step]:
            poll = c2.saved.get("poll")
            output = poll.get("output", "") if isinstance(poll, dict) else ""
            return say(c2.id("reply"), f"Terminal {terminal_id} started {command_line}; output so far:\n{output}")

        return _poll(terminal_id, lambda r: bool(r.get("output")), time.monotonic() + SPAWN_WAIT_SECONDS, running)

    return [
        {"request": "terminal/create", "params": {"command": command_line}, "save": "terminal"},
        {"call": created},
    ]


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "read": _read,
    "write": _write,
    "edit": _edit,
    "run": _run,
    "spawn": _spawn,
}
