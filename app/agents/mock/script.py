"""The legacy mock script (behavior §10) as ACP traffic.

A script is a list of steps; each step is a dict:

- ``{"update": {...}}``: a ``session/update`` notification with that update
- ``{"request": method, "params": {...}, "save": name}``: an agent->client request; the answer is
  kept in ``ctx.saved[name]``; with ``"detach": True`` it is sent and the script goes on at once
- ``{"notify": method, "params": {...}}``: any other notification
- ``{"raw_line": text}``: a line written to stdout as is (not JSON-RPC)
- ``{"parallel": [steps]}``: the steps run concurrently (requests pending at the same time)
- ``{"call": fn}``: ``fn(ctx)`` returns more steps, run at that point (for answers to requests)
- ``{"sleep": seconds}`` / ``{"exit": code}``

Each module of scripts lists its own in ``COMMANDS`` (by first word) and ``EXACT`` (whole
message, case-insensitive), plain dicts that ``commands.py`` puts together. Native ids follow the
legacy ``mock_<n>_<name>`` scheme: they travel as ACP ``messageId``/``toolCallId`` and become the
legacy ``native_item_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Step = dict[str, Any]


@dataclass
class Context:
    prefix: str
    message: str
    session: dict[str, Any]
    agent: Any = None
    saved: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "end_turn"
    result_meta: dict[str, Any] = field(default_factory=dict)  # `_meta` of the session/prompt result
    result_fields: dict[str, Any] = field(default_factory=dict)  # more fields of that result (`usage`)
    after_reply: list[Step] = field(default_factory=list)  # run once the prompt is answered

    @property
    def words(self) -> list[str]:
        return self.message.split()

    @property
    def rest(self) -> str:
        return " ".join(self.words[1:])

    def id(self, name: str) -> str:
        return f"{self.prefix}_{name}"


Script = Callable[[Context], list[Step]]


# ---- step builders -------------------------------------------------------------------------
def chunk(message_id: str, text: str, kind: str = "agent_message_chunk", **meta: Any) -> Step:
    content: dict[str, Any] = {"type": "text", "text": text}
    if meta:
        content["_meta"] = {f"sandbox-agent/{k}": v for k, v in meta.items()}
    return {"update": {"sessionUpdate": kind, "messageId": message_id, "content": content}}


def whole(message_id: str, blocks: list[dict[str, Any]], status: str = "completed") -> Step:
    """An assistant message given whole (ACP v2 ``agent_message``, which replaces what came before
    under its messageId), in progress or done: the legacy mock's items came whole, not streamed."""
    return update(
        {
            "sessionUpdate": "agent_message",
            "messageId": message_id,
            "content": blocks,
            "_meta": {"sandbox-agent/status": status},
        }
    )


def say(message_id: str, text: str) -> list[Step]:
    """An assistant message as the legacy mock had it: item.started with the whole text, then the
    bridge's synthetic item.delta (an item that streamed none gets one) and item.completed."""
    return [whole(message_id, [{"type": "text", "text": text}])]


def stream(
    message_id: str, started: list[dict[str, Any]], chunks: tuple[str, ...], done: list[dict[str, Any]]
) -> list[Step]:
    """A message that starts with ``started``, streams ``chunks`` (one item.delta each) and ends as
    ``done``: the legacy mock's streamed items, whose deltas need not add up to the content."""
    return [
        whole(message_id, started, "in_progress"),
        *(chunk(message_id, text) for text in chunks),
        whole(message_id, done),
    ]


def update(payload: dict[str, Any]) -> Step:
    return {"update": payload}


# ---- scripts -------------------------------------------------------------------------------
# Every command (a test checks that none is missing); the legacy mock's first, then the bridge's.
HELP_TEXT = "\n".join(
    [
        "Mock agent commands:",
        "- demo: run a full UI coverage sequence with markers.",
        "- markdown: streaming markdown fixture.",
        "- tool (tools, tooling): tool call + tool result with file refs.",
        "- status: status item updates.",
        "- image: message with image content part.",
        "- unknown: item.kind=unknown example.",
        "- permission (permissions): permission requests (pending).",
        "- question (questions): question requests (pending).",
        "- error: error + agent.unparsed events.",
        "- unparsed: emit agent.unparsed only.",
        "- end (ended, session.end): emit session.ended.",
        "- help: this list.",
        "- echo <text> (say): reply with the text.",
        "- stopreason <text>: reply, then end the turn with that `stopReason` (any string).",
        "- plan: a plan with three entries, updated as they are done.",
        "- diff: an edit whose result is an ACP v2 structured diff.",
        "- v2: ACP v2 update shapes (whole messages, streamed tool content, item plan).",
        "- meta: reply with the sandbox-agent _meta this agent received.",
        "- title: rename the session.",
        "- mode <id>: switch the agent's mode.",
        "- read <path> [<line> [<limit>]]: read a file through the client (fs/read_text_file).",
        "- write <path> <text>: write a file through the client (fs/write_text_file).",
        "- edit <path> <old> => <new>: replace text in a file itself (not through the client); the diff "
        "shows the snippets (trimmed), as claude's does.",
        "- run [--timeout=<seconds>] <command>: run a shell command in a client terminal.",
        "- spawn <command>: start a shell command in a client terminal and leave it running.",
        "- burst <count> [<size>]: one message streamed as <count> chunks, as fast as possible.",
        "- history: the earlier messages of this session (kept across bridge restarts).",
        "- confirm: two permission requests, each awaited; the turn ends once both are answered.",
        "- usage <input> <output> [<cost>]: report the turn's tokens (the prompt result's usage) and "
        "the session's running cost in USD (usage_update).",
        "",
        "Any other text will be echoed as an assistant message.",
    ]
)

# The legacy markdown fixture: a started text, then these chunks, then the whole document.
MARKDOWN_STARTED = "Markdown demo (streaming follows)..."
MARKDOWN_CHUNKS = (
    "# Markdown Demo\n\n**Bo",
    "ld**, *ita",
    "lic*, ***bold-",
    "italic***, and ~~stri",
    "kethrough~~.\n\nInline code: `const x = 1`.\n\n## Lists\n- Item one\n  - Nested item\n- Item two\n\n1.",
    " First\n2. Second\n\n> Blockquote with **bold** text.\n\n## Code\n```t",
    "s\nconst answer: number = 42;\nconsole.log(answer);\n```\n\n## Table\n| Column A | Column B |\n"
    "|:---------|---------:|\n| Left",
    "     | Right    |\n| Alpha    | Beta     |\n\n## Link\n[Example](https://example.com)\n\n---\n\n"
    "End of markdown demo.",
)
MARKDOWN_DOCUMENT = "".join(MARKDOWN_CHUNKS)


def _ok(ctx: Context) -> list[Step]:
    return say(ctx.id("ok"), "OK")


def _first(ctx: Context) -> list[Step]:
    return say(ctx.id("first"), "FIRST")


def _second(ctx: Context) -> list[Step]:
    return say(ctx.id("second"), "SECOND")


def _help(ctx: Context) -> list[Step]:
    return say(ctx.id("help"), HELP_TEXT)


def _echo(ctx: Context) -> list[Step]:
    return say(ctx.id("echo"), ctx.rest or "Tell me what to say after `echo`.")


def _stop_reason(ctx: Context) -> list[Step]:
    ctx.stop_reason = ctx.rest or "end_turn"
    return say(ctx.id("stop"), f"stopping with {ctx.stop_reason}")


def markdown_steps(ctx: Context) -> list[Step]:
    text = {"type": "text", "text": MARKDOWN_STARTED}
    return stream(ctx.id("markdown"), [text], MARKDOWN_CHUNKS, [{"type": "text", "text": MARKDOWN_DOCUMENT}])


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "help": _help,
    "echo": _echo,
    "say": _echo,
    "stopreason": _stop_reason,
    "markdown": markdown_steps,
}
EXACT: dict[str, Script] = {
    "Reply with exactly the single word OK.": _ok,
    "Reply with exactly the word FIRST.": _first,
    "Reply with exactly the word SECOND.": _second,
}
