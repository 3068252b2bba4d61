"""Mock scripts that ask a person (behavior §10.2): permission requests and questions as real ACP
requests. Where the legacy script asks twice, both requests are sent at once and are pending together.
After the answers the mock says what it was granted or told, and the turn ends.

Permission ids are the legacy ``mock_<n>_permission``/``mock_<n>_permission_denied``, sent as the
tool call id; the legacy action and metadata travel in ``_meta["sandbox-agent/action"|"metadata"]``.
Questions use elicitation (form mode) when the client advertises it, else the
``_sandbox-agent/session/request_question`` extension; ids travel in ``_meta["sandbox-agent/questionId"]``.
"""

from __future__ import annotations

import json
from typing import Any

from .script import COMMANDS, Context, Step, command, exact, say

OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]
KIND_BY_OPTION = {option["optionId"]: option["kind"] for option in OPTIONS}
GRANT_TEXT = {
    "allow_once": "granted once",
    "allow_always": "granted for the session",
    "reject_once": "rejected",
    "reject_always": "rejected for the session",
}
EXTENSION_METHOD = "_sandbox-agent/session/request_question"


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
    return {"request": "session/request_permission", "params": params, "save": name}


def command_permission(ctx: Context, command_line: str) -> Step:
    return permission_request(
        ctx,
        "permission",
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
        return {"request": "elicitation/create", "params": params, "save": name}
    params = {"questionId": ctx.id(name), "prompt": prompt, "options": labels}
    return {"request": EXTENSION_METHOD, "params": params, "save": name}


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


# ---- what the mock was told ----------------------------------------------------------------------
def describe_permission(result: Any) -> str:
    if not isinstance(result, dict):
        return "no answer"
    if "_error" in result:
        return f"failed: {result['_error'].get('message')}"
    outcome: dict[str, Any] = result["outcome"] if isinstance(result.get("outcome"), dict) else {}
    if outcome.get("outcome") == "selected":
        kind = KIND_BY_OPTION.get(str(outcome.get("optionId")), "")
        return f"{GRANT_TEXT.get(kind, 'unknown option')} ({outcome.get('optionId')})"
    if outcome.get("outcome") == "cancelled":
        return "cancelled"
    return f"unexpected answer {json.dumps(result)}"


def describe_question(result: Any) -> str:
    if not isinstance(result, dict):
        return "no answer"
    if "_error" in result:
        return f"failed: {result['_error'].get('message')}"
    if "action" in result:  # elicitation
        if result["action"] == "accept":
            return f"answered {json.dumps(result.get('content'), sort_keys=True)}"
        return {"decline": "declined", "cancel": "cancelled"}.get(result["action"], f"unexpected {result['action']}")
    if result.get("outcome") == "answered":
        return f"answered {json.dumps(result.get('answers'))}"
    return str(result.get("outcome", "unexpected answer"))


def granted(result: Any) -> bool:
    outcome = result.get("outcome") if isinstance(result, dict) else None
    return (
        isinstance(outcome, dict)
        and outcome.get("outcome") == "selected"
        and KIND_BY_OPTION.get(str(outcome.get("optionId")), "").startswith("allow")
    )


def permission_report(ctx: Context, *names: str) -> list[Step]:
    lines = [f"Permission {ctx.id(name)}: {describe_permission(ctx.saved.get(name))}." for name in names]
    return say(ctx.id("permission_result"), "\n".join(lines))


def question_report(ctx: Context, *names: str) -> list[Step]:
    lines = [f"Question {ctx.id(name)}: {describe_question(ctx.saved.get(name))}." for name in names]
    return say(ctx.id("question_result"), "\n".join(lines))


# ---- scripts -------------------------------------------------------------------------------------
def permission_steps(ctx: Context) -> list[Step]:
    """Both legacy permission requests, pending at once."""
    return [{"parallel": [command_permission(ctx, "echo mock"), file_change_permission(ctx)]}]


def question_steps(ctx: Context) -> list[Step]:
    """Both legacy questions, pending at once."""
    return [{"parallel": [color_question(ctx), yes_no(ctx, "question_reject", "Allow mock experiment?")]}]


@command("permission", "permissions")
def _permissions(ctx: Context) -> list[Step]:
    return [*permission_steps(ctx), {"call": lambda c: permission_report(c, "permission", "permission_denied")}]


@command("question", "questions")
def _questions(ctx: Context) -> list[Step]:
    return [*question_steps(ctx), {"call": lambda c: question_report(c, "question", "question_reject")}]


@exact("List files in the current directory using available tools.")
def _list_files(ctx: Context) -> list[Step]:
    return [command_permission(ctx, "ls"), {"call": lambda c: permission_report(c, "permission")}]


def _after_bash(ctx: Context) -> list[Step]:
    tool = COMMANDS.get("tool")
    if granted(ctx.saved.get("permission")) and tool is not None:
        return tool(ctx)
    return permission_report(ctx, "permission")


@exact("Use the bash tool to run `ls` in the current directory. Do not answer without using the tool.")
def _bash(ctx: Context) -> list[Step]:
    return [command_permission(ctx, "ls"), {"call": _after_bash}]


@exact(
    "Use the AskUserQuestion tool to ask exactly one yes/no question, then wait for a reply. Do not answer yourself.",
    "Call the AskUserQuestion tool with exactly one yes/no question and wait for a reply. Do not answer yourself.",
)
def _ask(ctx: Context) -> list[Step]:
    return [yes_no(ctx, "question", "Proceed?"), {"call": lambda c: question_report(c, "question")}]
