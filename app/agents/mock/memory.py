"""What the mock remembers of a session, on disk, so that ``session/load`` works after the bridge
restarts: each prompt when it arrives (``{"prompt": ...}``) and the text of the mock's reply when
the turn ends (``{"reply": ...}``), one JSON line each, in
``$ACP_BRIDGE_MOCK_STATE_DIR/<sha256 of the session id>.jsonl``; a turn cut short keeps its prompt.
Without that variable the mock keeps nothing and does not advertise ``loadSession``.

``history`` answers with what the session was told before, so a restart that kept the conversation
shows.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .script import Context, Script, Step, say

STATE_ENV = "ACP_BRIDGE_MOCK_STATE_DIR"
REPLY_KEPT = 2000  # characters of a reply kept for the replay
PROMPT_KEPT = 2000


def state_dir() -> Path | None:
    value = os.environ.get(STATE_ENV)
    return Path(value) if value else None


def _path(session_id: str) -> Path | None:
    directory = state_dir()
    if directory is None:
        return None
    return directory / (hashlib.sha256(session_id.encode()).hexdigest() + ".jsonl")


def load(session_id: str) -> list[dict[str, str]] | None:
    """The turns kept for the session; None when nothing is kept (never seen, or no state dir)."""
    path = _path(session_id)
    if path is None:
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    turns: list[dict[str, str]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if not isinstance(entry, dict):
            continue
        if "prompt" in entry:
            turns.append({"prompt": str(entry["prompt"]), "reply": ""})
        elif "reply" in entry and turns:
            turns[-1]["reply"] = str(entry["reply"])
    return turns


def forget(session_id: str) -> None:
    """A new session under an id used before starts with no history."""
    path = _path(session_id)
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def begin(session_id: str, cwd: Any) -> None:
    """A new session: its first line names it (what ``session/list`` answers)."""
    _write(session_id, {"sessionId": session_id, "cwd": cwd if isinstance(cwd, str) else ""})


def sessions() -> list[dict[str, str]]:
    """The sessions kept on disk, ``{sessionId, cwd}`` each (ACP ``session/list``)."""
    directory = state_dir()
    found: list[dict[str, str]] = []
    if directory is None:
        return found
    try:
        paths = sorted(directory.glob("*.jsonl"))
    except OSError:
        return found
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                first = json.loads(fh.readline() or "null")
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and isinstance(first.get("sessionId"), str):
            found.append({"sessionId": first["sessionId"], "cwd": str(first.get("cwd") or "")})
    return found


def remember_prompt(session: dict[str, Any], prompt: str) -> None:
    """Kept as soon as it arrives: a turn the bridge's stop cuts short is remembered too."""
    _write(session["id"], {"prompt": prompt[:PROMPT_KEPT]})


def remember_reply(session: dict[str, Any], prompt: str, reply: str) -> None:
    """At the end of the turn: the history ``history`` lists, and the reply for a replay."""
    session.setdefault("history", []).append({"prompt": prompt[:PROMPT_KEPT], "reply": reply[:REPLY_KEPT]})
    _write(session["id"], {"reply": reply[:REPLY_KEPT]})


def _write(session_id: str, entry: dict[str, Any]) -> None:
    path = _path(session_id)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    except OSError:
        pass  # memory is best effort: the session goes on


def reply_text(update: dict[str, Any]) -> str:
    """The text an assistant message update adds (a chunk's, or a whole message's)."""
    kind = update.get("sessionUpdate")
    content = update.get("content")
    if kind == "agent_message_chunk" and isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if kind == "agent_message" and isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def replay(session_id: str, turns: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The ``session/update`` params that replay the history (ACP ``session/load``)."""
    out = []
    for n, turn in enumerate(turns, 1):
        for kind, message_id, text in (
            ("user_message_chunk", f"mock_{n}_user", turn["prompt"]),
            ("agent_message_chunk", f"mock_{n}_reply", turn["reply"]),
        ):
            update = {"sessionUpdate": kind, "messageId": message_id, "content": {"type": "text", "text": text}}
            out.append({"sessionId": session_id, "update": update})
    return out


def _history(ctx: Context) -> list[Step]:
    turns = ctx.session.get("history") or []
    if not turns:
        return say(ctx.id("history"), "No earlier messages in this session.")
    lines = [f"{n}. {turn['prompt']}" for n, turn in enumerate(turns, 1)]
    return say(ctx.id("history"), "Earlier messages in this session:\n" + "\n".join(lines))


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "history": _history,
}
