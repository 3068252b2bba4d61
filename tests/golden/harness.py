"""Replays a recorded ACP transcript through the translator, as a session would feed it.

A transcript is JSON lines ``{"t": seconds, "dir": "client->agent" | "agent->client", "msg": {...}}``.
The replay mirrors the session layer: a ``session/prompt`` request starts a turn, its response ends
it, ``session/update`` notifications and the ``_sandbox-agent/error`` extension are translated, and
the client's answers to ``terminal/output`` feed the terminal lookup. Agent requests (permissions,
files, terminals) belong to the client services and give no events here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.agents.profiles import PROFILES
from app.events.model import ERROR, EventDraft
from app.sessions.agent_setup import profile_tool_style
from app.translate.extensions import ERROR_NOTIFICATION, rpc_error_data
from app.translate.session_translator import SessionTranslator
from app.translate.tools import DEFAULT_STYLE, ToolStyle
from tests.support import ROOT, SHARED

AGENT = "agent->client"
CLIENT = "client->agent"
GOLDEN = ROOT / "tests" / "golden"
PROJECT_TRANSCRIPTS = GOLDEN / "transcripts"
SHARED_TRANSCRIPTS = SHARED / "acp" / "transcripts"
SHARED_EXPECTED = GOLDEN / "shared"


def project_transcripts() -> list[Path]:
    return sorted(PROJECT_TRANSCRIPTS.glob("*.jsonl"))


def shared_transcripts() -> list[Path]:
    return sorted(SHARED_TRANSCRIPTS.glob("*.jsonl")) if SHARED_TRANSCRIPTS.is_dir() else []


def transcripts() -> list[Path]:
    return project_transcripts() + shared_transcripts()


def expected_path(transcript: Path) -> Path:
    """``<name>.expected.json`` beside a project recording; under tests/golden/shared for shared ones."""
    folder = PROJECT_TRANSCRIPTS if transcript.parent == PROJECT_TRANSCRIPTS else SHARED_EXPECTED
    return folder / (transcript.name.removesuffix(".jsonl") + ".expected.json")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def style_for(transcript: Path) -> ToolStyle:
    """Recordings of a legacy id (``legacy-<agent>.jsonl``) are read with that agent's profile, as the
    bridge reads them; the others with the generic one."""
    name = transcript.name.removesuffix(".jsonl")
    if not name.startswith("legacy-"):
        return DEFAULT_STYLE
    return profile_tool_style(PROFILES[name.removeprefix("legacy-")])


@dataclass
class Replay:
    translator: SessionTranslator = field(default_factory=SessionTranslator)
    drafts: list[EventDraft] = field(default_factory=list)
    turns: dict[Any, str] = field(default_factory=dict)  # prompt request id -> turn id
    agent_requests: dict[Any, dict[str, Any]] = field(default_factory=dict)
    terminals: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.translator.terminal_output = self.terminals.get

    def feed(self, record: dict[str, Any]) -> None:
        msg = record["msg"]
        method = msg.get("method")
        if record["dir"] == CLIENT:
            if method == "session/prompt":
                turn_id = f"turn_{len(self.turns) + 1}"
                self.turns[msg.get("id")] = turn_id
                params = msg.get("params") or {}
                text = "".join(
                    b.get("text", "")
                    for b in params.get("prompt", [])
                    if isinstance(b, dict) and b.get("type") == "text"
                )
                self.drafts += self.translator.turn_started(turn_id, text, [], raw=msg)
            elif method is None and "result" in msg:
                request = self.agent_requests.pop(msg.get("id"), None)
                if request is not None and request.get("method") == "terminal/output":
                    terminal_id = (request.get("params") or {}).get("terminalId")
                    output = msg["result"].get("output") if isinstance(msg["result"], dict) else None
                    if isinstance(terminal_id, str) and isinstance(output, str):
                        self.terminals[terminal_id] = output
            return
        if method == "session/update":
            self.drafts += self.translator.session_update(msg.get("params"), msg)
        elif method == ERROR_NOTIFICATION:
            self.drafts += self.translator.agent_error(msg.get("params"), msg)
        elif isinstance(method, str) and "id" in msg:
            self.agent_requests[msg["id"]] = msg
            if method == "session/request_permission" and isinstance(msg.get("params"), dict):
                self.translator.tools.permission_tool_call(msg["params"].get("toolCall"))
        elif isinstance(method, str):
            if not method.startswith("_"):
                self.drafts += self.translator.unparsed(f"unknown notification: {method}", "agent.stdout", msg)
        elif msg.get("id") in self.turns:
            turn_id = self.turns.pop(msg["id"])
            if "error" in msg:
                error = msg["error"] if isinstance(msg["error"], dict) else {}
                data = rpc_error_data(error.get("code"), str(error.get("message", "")), error.get("data"))
                self.drafts.append(EventDraft(ERROR, data, synthetic=True, raw=msg))
                self.drafts += self.translator.turn_ended(turn_id, {"stopReason": "error"}, raw=None)
                return
            self.drafts += self.translator.turn_result(turn_id, msg.get("result"), msg, "<SESSION_ID>")


def replay(
    records: list[dict[str, Any]], style: ToolStyle = DEFAULT_STYLE, usage_status: bool = False
) -> list[EventDraft]:
    """The drafts a session would record; what is still open when the recording stops is completed,
    as terminating the session would."""
    run = Replay(SessionTranslator(tool_style=style, usage_status=usage_status))
    for record in records:
        run.feed(record)
    return run.drafts + run.translator.flush()


def replay_transcript(transcript: Path) -> list[EventDraft]:
    """A recording replayed as the bridge reads it: a legacy id's with that agent's profile (tool
    style, codex's usage status item), the others with the generic one."""
    name = transcript.name.removesuffix(".jsonl")
    profile = PROFILES.get(name.removeprefix("legacy-")) if name.startswith("legacy-") else None
    usage_status = profile is not None and profile.legacy_usage_status
    return replay(load(transcript), style_for(transcript), usage_status)


def summarize(draft: EventDraft) -> str:
    """One reviewable line per event: type, then the item's kind/role/status/ids and part types."""
    data = draft.data
    words = [draft.type]
    if draft.synthetic:
        words.append("synthetic")
    item = data.get("item")
    if isinstance(item, dict):
        words += [f"kind={item['kind']}", f"role={item['role']}", f"status={item['status']}", f"id={item['item_id']}"]
        words.append(f"native={item['native_item_id']}")
        if item["parent_id"] is not None:
            words.append(f"parent={item['parent_id']}")
        words.append("parts=" + ",".join(_part(p) for p in item["content"]))
    elif draft.type == "item.delta":
        words += [f"id={data['item_id']}", f"native={data['native_item_id']}"]
    elif draft.type in ("turn.ended", "session.ended"):
        words += [f"{k}={v}" for k, v in sorted(data.items()) if k in ("reason", "terminated_by")]
        if isinstance(data.get("metadata"), dict):
            words.append(f"stopReason={data['metadata'].get('stopReason')}")
    elif draft.type in ("error", "agent.unparsed"):
        words += [f"code={data.get('code')}", f"location={data.get('location')}"]
    return " ".join(words)


def _part(part: dict[str, Any]) -> str:
    kind = part["type"]
    if kind == "tool_call":
        return f"tool_call({part['name']})"
    if kind == "file_ref":
        return f"file_ref({part['action']}{'+diff' if part['diff'] else ''})"
    if kind == "reasoning":
        return f"reasoning({part['visibility']})"
    if kind == "status":
        return f"status({part['label']})"
    return str(kind)
