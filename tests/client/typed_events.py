"""A program as a user of the client writes it, checked with `mypy --strict` and pyright's strict mode
(tests/client/test_client_typing.py): every event type and every content part read through narrowing
alone, no `cast`, and `assert_never` proving that no type is left out. The test also runs it on the
events of a real session."""

from __future__ import annotations

from typing import assert_never

from acp_rest_bridge_client.models import ContentPart, UniversalEvent, UniversalItem


def describe_part(part: ContentPart) -> str:
    if part["type"] == "text":
        return part["text"]
    if part["type"] == "json":
        return f"json {part['json']!r}"
    if part["type"] == "tool_call":
        return f"call {part['name']}({part['arguments']}) as {part['call_id']}"
    if part["type"] == "tool_result":
        return f"result of {part['call_id']}: {part['output']}"
    if part["type"] == "file_ref":
        return f"{part['action']} {part['path']}" + (f"\n{part['diff']}" if "diff" in part else "")
    if part["type"] == "reasoning":
        return f"({part['visibility']}) {part['text']}"
    if part["type"] == "image":
        return f"image {part['path']} {part.get('mime', '?')}"
    if part["type"] == "status":
        return f"{part['label']}: {part.get('detail', '')}"
    assert_never(part)


def describe_item(item: UniversalItem) -> str:
    role = item.get("role", "-")
    parts = "; ".join(describe_part(part) for part in item["content"])
    return f"{item['kind']}/{role} {item['item_id']} [{item['status']}] {parts}"


def describe(event: UniversalEvent) -> str:
    """One line per event, reading each type's own data."""
    if event["type"] == "session.started":
        return f"session started {event['data'].get('metadata')!r}"
    if event["type"] == "session.ended":
        data = event["data"]
        return f"session ended: {data['reason']} by {data['terminated_by']} {data.get('exit_code', '')}"
    if event["type"] == "turn.started" or event["type"] == "turn.ended":
        return f"turn {event['data']['phase']} {event['data'].get('turn_id', '')}"
    if event["type"] == "item.started" or event["type"] == "item.completed":
        return describe_item(event["data"]["item"])
    if event["type"] == "item.delta":
        return f"delta of {event['data']['item_id']}: {event['data']['delta']}"
    if event["type"] == "error":
        return f"error {event['data'].get('code', '')}: {event['data']['message']}"
    if event["type"] == "permission.requested" or event["type"] == "permission.resolved":
        permission = event["data"]
        return f"permission {permission['permission_id']} {permission['action']} {permission['status']}"
    if event["type"] == "question.requested" or event["type"] == "question.resolved":
        question = event["data"]
        options = ", ".join(question["options"])
        return f"question {question['question_id']} {question['prompt']} [{options}] {question['status']}"
    if event["type"] == "agent.unparsed":
        return f"unparsed at {event['data']['location']}: {event['data']['error']}"
    assert_never(event)
