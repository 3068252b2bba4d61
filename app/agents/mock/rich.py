"""The rest of the legacy mock script (behavior §10) as ACP traffic, plus a few commands that show
what the legacy script never had (plans, v2 diffs and upserts).

Legacy-only shapes ride in ``_meta["sandbox-agent/..."]`` (item kind, status parts, reasoning
visibility, native item ids) and in the bridge's extensions: the ``_sandbox-agent/error``
notification, ``_meta["sandbox-agent/unparsed"]`` on an update, ``_meta["sandbox-agent/sessionEnd"]``
on the prompt result.
"""

from __future__ import annotations

import json
from typing import Any

from .hitl_script import command_permission, permission_steps, question_steps
from .script import Context, Script, Step, chunk, markdown_steps, say, stream, update, whole

META = "sandbox-agent/"
# A 1x1 transparent PNG: image blocks carry real image data.
PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def meta(**values: Any) -> dict[str, Any]:
    return {META + key: value for key, value in values.items()}


def message(message_id: str, block: dict[str, Any], kind: str = "agent_message_chunk", **extra: Any) -> Step:
    payload: dict[str, Any] = {"sessionUpdate": kind, "messageId": message_id, "content": block}
    if extra:
        payload["_meta"] = meta(**extra)
    return update(payload)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


# ---- legacy parts ----------------------------------------------------------------------------
def system_steps(ctx: Context) -> list[Step]:
    return [message(ctx.id("system"), text("System ready for mock events."), itemKind="system")]


def rich_steps(ctx: Context) -> list[Step]:
    """One message item: text, public and private reasoning, and a JSON part; it starts whole,
    streams two deltas and completes whole, as the legacy mock's did."""
    analysis = {"stage": "analysis", "ok": True}
    parts = [
        text("Mock assistant response with rich content."),
        {**text("Public reasoning for display."), "_meta": meta(reasoningVisibility="public")},
        {**text("Private reasoning hidden by default."), "_meta": meta(reasoningVisibility="private")},
        {
            "type": "resource",
            "resource": {"uri": "mock://analysis.json", "mimeType": "application/json", "text": json.dumps(analysis)},
        },
    ]
    return stream(ctx.id("assistant_rich"), parts, ("Mock assistant ", "streaming delta."), parts)


def status_steps(ctx: Context) -> list[Step]:
    status = ctx.id("status")
    return [
        message(status, text(""), status={"label": "Indexing", "detail": "2 files"}),
        message(status, text(""), status={"label": "Indexing", "detail": "Done"}),
    ]


def tool_steps(ctx: Context) -> list[Step]:
    """tool_call item, then a tool_result item with a read, a write and a patch file_ref, ending failed."""
    call = ctx.id("call")
    folder = ctx.prefix
    ids = meta(toolName="mock.search", nativeItemId=ctx.id("tool_call"), resultNativeItemId=ctx.id("tool_result"))
    return [
        update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": "mock.search",
                "kind": "search",
                "status": "pending",
                "rawInput": {"query": "example"},
                "_meta": ids,
            }
        ),
        update({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "in_progress"}),
        update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call,
                "rawOutput": "mock search results",
                "content": [
                    {
                        "type": "content",
                        "content": {"type": "resource_link", "uri": f"{folder}/readme.md", "name": "readme.md"},
                    },
                    {"type": "diff", "path": f"{folder}/output.txt", "oldText": None, "newText": "mock output\n"},
                    {"type": "diff", "path": f"{folder}/patch.txt", "oldText": "old\n", "newText": "new\n"},
                ],
                "locations": [{"path": f"{folder}/readme.md"}],
            }
        ),
        update({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "failed"}),
    ]


def image_steps(ctx: Context) -> list[Step]:
    image = ctx.id("image")
    block = {"type": "image", "mimeType": "image/png", "data": PIXEL_PNG, "uri": f"{ctx.prefix}/image.png"}
    return [whole(image, [text("Here is a mock image output."), block])]


def unknown_steps(ctx: Context) -> list[Step]:
    return [message(ctx.id("unknown"), text("Unknown item kind example."), itemKind="unknown")]


def unparsed_steps(ctx: Context) -> list[Step]:
    payload = {
        "sessionUpdate": "_mock/unsupported",
        "raw": "mock",
        "_meta": meta(unparsed={"error": "unsupported payload", "location": "mock.stream"}),
    }
    return [update(payload)]


def error_steps(ctx: Context) -> list[Step]:
    params = {
        "sessionId": ctx.session.get("id"),
        "message": "Mock error event.",
        "code": "mock_error",
        "details": {"mock": True},
        "_meta": meta(synthetic=True),
    }
    return [{"notify": "_sandbox-agent/error", "params": params}, *unparsed_steps(ctx)]


# ---- commands ------------------------------------------------------------------------------
def _rich(ctx: Context) -> list[Step]:
    return rich_steps(ctx)


def _status(ctx: Context) -> list[Step]:
    return status_steps(ctx)


def _tool(ctx: Context) -> list[Step]:
    return tool_steps(ctx)


def _image(ctx: Context) -> list[Step]:
    return image_steps(ctx)


def _unknown(ctx: Context) -> list[Step]:
    return unknown_steps(ctx)


def _error(ctx: Context) -> list[Step]:
    return error_steps(ctx)


def _unparsed(ctx: Context) -> list[Step]:
    return unparsed_steps(ctx)


def _end(ctx: Context) -> list[Step]:
    # The legacy mock ended the session without exiting: a session.ended instead of turn.ended.
    ctx.result_meta[META + "sessionEnd"] = {"terminatedBy": "agent"}
    return []


def _bash(ctx: Context) -> list[Step]:
    # Legacy: the request, then the tool sequence without waiting for the answer, then turn.ended.
    return [command_permission(ctx, "ls"), *tool_steps(ctx)]


MARKERS = (
    "Next: system message (system role).",
    "Next: assistant message with deltas, reasoning, and JSON content parts.",
    "Next: status item updates.",
    "Next: markdown rendering + streaming markdown deltas.",
    "Next: tool call item.",
    "Next: image output content part.",
    "Next: unknown item kind.",
    "Next: permission requests (pending).",
    "Next: question requests (pending).",
    "Next: error and agent.unparsed events.",
)


def _demo(ctx: Context) -> list[Step]:
    parts = (
        system_steps,
        rich_steps,
        status_steps,
        markdown_steps,
        tool_steps,
        image_steps,
        unknown_steps,
        permission_steps,  # legacy: the requests stay pending and the demo goes on
        question_steps,
        error_steps,
    )
    steps: list[Step] = []
    for number, (marker, part) in enumerate(zip(MARKERS, parts, strict=True), start=1):
        steps += say(ctx.id(f"marker_{number}"), marker)
        steps += part(ctx)
    return steps


# ---- beyond the legacy script --------------------------------------------------------------
def _plan(ctx: Context) -> list[Step]:
    entries = [("Read the code", "high"), ("Write the change", "medium"), ("Run the tests", "low")]

    def plan(statuses: tuple[str, ...]) -> Step:
        rows = [
            {"content": content, "priority": priority, "status": status}
            for (content, priority), status in zip(entries, statuses, strict=True)
        ]
        return update({"sessionUpdate": "plan", "entries": rows})

    return [
        plan(("in_progress", "pending", "pending")),
        plan(("completed", "in_progress", "pending")),
        *say(ctx.id("plan_done"), "Plan updated."),
    ]


V2_PATCH = (
    "diff --git a/{p}/added.txt b/{p}/added.txt\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/{p}/added.txt\n"
    "@@ -0,0 +1 @@\n"
    "+added\n"
    "diff --git a/{p}/patch.txt b/{p}/patch.txt\n"
    "--- a/{p}/patch.txt\n"
    "+++ b/{p}/patch.txt\n"
    "@@ -1 +1 @@\n"
    "-old\n"
    "+new\n"
    "diff --git a/{p}/old_name.txt b/{p}/new_name.txt\n"
    "similarity index 100%\n"
    "rename from {p}/old_name.txt\n"
    "rename to {p}/new_name.txt\n"
    "diff --git a/{p}/gone.txt b/{p}/gone.txt\n"
    "deleted file mode 100644\n"
    "--- a/{p}/gone.txt\n"
    "+++ /dev/null\n"
    "@@ -1 +0,0 @@\n"
    "-gone\n"
)


def _diff(ctx: Context) -> list[Step]:
    """An edit whose result is an ACP v2 structured diff (several files, a binary one without patch)."""
    call = ctx.id("diff_call")
    p = ctx.prefix
    changes = [
        {"operation": "add", "path": f"{p}/added.txt", "fileType": "text"},
        {"operation": "modify", "path": f"{p}/patch.txt", "fileType": "text"},
        {"operation": "move", "oldPath": f"{p}/old_name.txt", "path": f"{p}/new_name.txt"},
        {"operation": "delete", "path": f"{p}/gone.txt"},
        {"operation": "modify", "path": f"{p}/logo.png", "fileType": "binary", "mimeType": "image/png"},
    ]
    diff = {"type": "diff", "changes": changes, "patch": {"format": "git_patch", "text": V2_PATCH.format(p=p)}}
    return [
        update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": "apply_patch",
                "kind": "edit",
                "status": "in_progress",
                "rawInput": {"files": len(changes)},
            }
        ),
        update({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed", "content": [diff]}),
    ]


def _meta(ctx: Context) -> list[Step]:
    """Replies with the _meta the agent received (session/new and this prompt), as JSON: the bridge's
    ``sandbox-agent/*`` keys, and ``traceparent``/``tracestate`` when the bridge traces."""
    received = {"sessionNew": ctx.session.get("meta") or {}, "prompt": ctx.session.get("prompt_meta") or {}}
    return say(ctx.id("meta"), json.dumps(received, sort_keys=True))


def _title(ctx: Context) -> list[Step]:
    """Renames the session (session_info_update), as agents that summarise a conversation do."""
    stamp = "2026-01-30T10:15:42Z"
    return [update({"sessionUpdate": "session_info_update", "title": ctx.rest or None, "updatedAt": stamp})]


def _mode(ctx: Context) -> list[Step]:
    """Switches the agent's mode on its own (current_mode_update)."""
    ctx.session["mode"] = ctx.rest or "build"
    return [update({"sessionUpdate": "current_mode_update", "currentModeId": ctx.session["mode"]})]


def _v2(ctx: Context) -> list[Step]:
    """ACP v2 draft shapes: whole-message upserts, a tool call that starts with an update and streams
    its content in chunks, an item plan, and a state update."""
    thought, answer, call = ctx.id("v2_thought"), ctx.id("v2_answer"), ctx.id("v2_call")
    return [
        update({"sessionUpdate": "agent_thought", "messageId": thought, "content": [text("Thinking in v2.")]}),
        chunk(answer, "draft "),
        update({"sessionUpdate": "agent_message", "messageId": answer, "content": [text("Final v2 answer.")]}),
        update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call,
                "title": "run",
                "kind": "execute",
                "status": "in_progress",
                "rawInput": {"command": "echo v2"},
            }
        ),
        update(
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": call,
                "content": {"type": "content", "content": text("v2\n")},
            }
        ),
        update({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"}),
        update(
            {
                "sessionUpdate": "plan_update",
                "plan": {
                    "type": "items",
                    "planId": "v2",
                    "entries": [{"content": "Ship", "priority": "high", "status": "completed"}],
                },
            }
        ),
        update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
    ]


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "status": _status,
    "tool": _tool,
    "tools": _tool,
    "tooling": _tool,
    "image": _image,
    "unknown": _unknown,
    "error": _error,
    "unparsed": _unparsed,
    "end": _end,
    "ended": _end,
    "session.end": _end,
    "demo": _demo,
    "plan": _plan,
    "diff": _diff,
    "meta": _meta,
    "title": _title,
    "mode": _mode,
    "v2": _v2,
}
EXACT: dict[str, Script] = {
    "Answer briefly and include your reasoning.": _rich,
    "Provide a short status update.": _status,
    "Use the bash tool to run `ls` in the current directory. Do not answer without using the tool.": _bash,
}
