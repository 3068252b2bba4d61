"""Mock scripts that ask a person (behavior §10.2): permission requests and questions as real ACP
requests. As legacy's mock, it sends them and goes on without waiting: they stay pending until a person
answers, the answers change nothing in the script, and a script whose last event asks a person ends its
turn without a turn.ended (``_meta["sandbox-agent/turnEnded"]: false`` on the prompt result), its
requests sent right after that answer.

Permission ids are the legacy ``mock_<n>_permission``/``mock_<n>_permission_denied``, sent as the
tool call id; the legacy action and metadata travel in ``_meta["sandbox-agent/action"|"metadata"]``.
Questions use elicitation (form mode) when the client advertises it, else the
``_sandbox-agent/session/request_question`` extension; ids travel in ``_meta["sandbox-agent/questionId"]``.
"""

from __future__ import annotations

from typing import Any

from .script import Context, Script, Step, say

OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]
EXTENSION_METHOD = "_sandbox-agent/session/request_question"
TURN_ENDED = "sandbox-agent/turnEnded"


# ---- requests ----------------------------------------------------------------------------------
def permission_request(
    ctx: Context, name: str, *, action: str, kind: str, title: str, raw_input: dict[str, Any], legacy: dict[str, Any]
) -> Step:
    params = {
        "toolCall": {
            "toolCallId": ctx.id(name),
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": raw_input,
        },
        "options": OPTIONS,
        "_meta": {"sandbox-agent/action": action, "sandbox-agent/metadata": legacy},
    }
    return {"request": "session/request_permission", "params": params, "detach": True}


def command_permission(ctx: Context, command_line: str, name: str = "permission") -> Step:
    return permission_request(
        ctx,
        name,
        action="command_execution",
        kind="execute",
        title=command_line,
        raw_input={"command": command_line},
        legacy={"codexRequestKind": "commandExecution", "command": command_line},
    )


def file_change_permission(ctx: Context) -> Step:
    path = f"{ctx.prefix}/deny.txt"
    return permission_request(
        ctx,
        "permission_denied",
        action="file_change",
        kind="edit",
        title=f"Write {path}",
        raw_input={"path": path},
        legacy={"codexRequestKind": "fileChange", "path": path},
    )


def _form_supported(ctx: Context) -> bool:
    caps = getattr(ctx.agent, "client_capabilities", None) or {}
    elicitation = caps.get("elicitation") if isinstance(caps, dict) else None
    return isinstance(elicitation, dict) and isinstance(elicitation.get("form"), dict)


def question_request(ctx: Context, name: str, prompt: str, field: dict[str, Any], labels: list[str]) -> Step:
    if _form_supported(ctx):
        params: dict[str, Any] = {
            "mode": "form",
            "message": prompt,
            "requestedSchema": {"type": "object", "properties": {"answer": field}, "required": ["answer"]},
            "_meta": {"sandbox-agent/questionId": ctx.id(name)},
        }
        return {"request": "elicitation/create", "params": params, "detach": True}
    params = {"questionId": ctx.id(name), "prompt": prompt, "options": labels}
    return {"request": EXTENSION_METHOD, "params": params, "detach": True}


def yes_no(ctx: Context, name: str, prompt: str) -> Step:
    return question_request(
        ctx, name, prompt, {"type": "string", "title": prompt, "enum": ["Yes", "No"]}, ["Yes", "No"]
    )


def color_question(ctx: Context) -> Step:
    field = {
        "type": "string",
        "title": "Choose a color",
        "oneOf": [{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}],
    }
    return question_request(ctx, "question", "Choose a color", field, ["Red", "Blue"])


# ---- scripts -------------------------------------------------------------------------------------
def ends_asking(ctx: Context, requests: list[Step]) -> list[Step]:
    """A script whose last events ask a person: legacy recorded no turn.ended then (behavior §10.1)
    and its turn was over, so the prompt is answered first and the requests follow, left pending."""
    ctx.result_meta[TURN_ENDED] = False
    ctx.after_reply = requests
    return []


def permission_steps(ctx: Context) -> list[Step]:
    """Both legacy permission requests, in order, left pending."""
    return [command_permission(ctx, "echo mock"), file_change_permission(ctx)]


def question_steps(ctx: Context) -> list[Step]:
    """Both legacy questions, in order, left pending."""
    return [color_question(ctx), yes_no(ctx, "question_reject", "Allow mock experiment?")]


def _permissions(ctx: Context) -> list[Step]:
    return ends_asking(ctx, permission_steps(ctx))


def _questions(ctx: Context) -> list[Step]:
    return ends_asking(ctx, question_steps(ctx))


def _confirm(ctx: Context) -> list[Step]:
    """Unlike legacy's scripts, one that waits: two permission requests, each answered before the
    script goes on, then a message with the answers; the turn ends as any other."""

    def asked(name: str, command_line: str) -> Step:
        return {**command_permission(ctx, command_line, name), "detach": False, "save": name}

    def answers(ctx: Context) -> list[Step]:
        chosen = []
        for name in ("confirm_first", "confirm_second"):
            outcome = (ctx.saved.get(name) or {}).get("outcome") or {}
            chosen.append(str(outcome.get("optionId") or outcome.get("outcome")))
        return say(ctx.id("confirm"), "Answers: " + ", ".join(chosen))

    return [asked("confirm_first", "echo first"), asked("confirm_second", "echo second"), {"call": answers}]


def _list_files(ctx: Context) -> list[Step]:
    return ends_asking(ctx, [command_permission(ctx, "ls")])


def _ask(ctx: Context) -> list[Step]:
    return ends_asking(ctx, [yes_no(ctx, "question", "Proceed?")])


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "permission": _permissions,
    "permissions": _permissions,
    "question": _questions,
    "questions": _questions,
    "confirm": _confirm,
}
EXACT: dict[str, Script] = {
    "List files in the current directory using available tools.": _list_files,
    (
        "Use the AskUserQuestion tool to ask exactly one yes/no question, then wait for a reply. "
        "Do not answer yourself."
    ): _ask,
    (
        "Call the AskUserQuestion tool with exactly one yes/no question and wait for a reply. Do not answer yourself."
    ): _ask,
}
