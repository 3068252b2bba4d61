"""The bridge's request params models accept and reject what the SDK's schema models do."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.acp import requests

CASES: list[tuple[str, dict[str, Any]]] = [
    ("ReadTextFileRequest", {"sessionId": "s", "path": "/a"}),
    ("ReadTextFileRequest", {"sessionId": "s", "path": "/a", "line": 3, "limit": 10, "_meta": {"k": 1}}),
    ("ReadTextFileRequest", {"sessionId": "s", "path": "/a", "line": "3"}),
    ("ReadTextFileRequest", {"sessionId": "s", "path": "/a", "line": -1}),
    ("ReadTextFileRequest", {"sessionId": "s", "path": "/a", "limit": 1.5}),
    ("ReadTextFileRequest", {"sessionId": "s", "path": 5}),
    ("ReadTextFileRequest", {"path": "/a"}),
    ("ReadTextFileRequest", {"session_id": "s", "path": "/a", "unknown": True}),
    ("WriteTextFileRequest", {"sessionId": "s", "path": "/a", "content": "x"}),
    ("WriteTextFileRequest", {"sessionId": "s", "path": "/a"}),
    ("WriteTextFileRequest", {"sessionId": "s", "path": "/a", "content": None}),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls"}),
    (
        "CreateTerminalRequest",
        {
            "sessionId": "s",
            "command": "ls",
            "args": ["-l"],
            "env": [{"name": "A", "value": "1"}],
            "cwd": "/tmp",
            "outputByteLimit": 10,
        },
    ),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls", "env": [{"name": "A"}]}),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls", "args": "-l"}),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls", "outputByteLimit": -5}),
    ("CreateTerminalRequest", {"sessionId": "s", "args": []}),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls", "args": ["a", 1, "b"], "cwd": 7}),
    ("CreateTerminalRequest", {"sessionId": "s", "command": "ls", "env": "A=1"}),
]


def _validate(model: type[BaseModel], params: dict[str, Any]) -> tuple[bool, Any]:
    try:
        value = model.model_validate(params)
    except ValidationError as exc:
        return False, sorted((tuple(e["loc"]), e["type"]) for e in exc.errors())
    return True, value.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_same_verdict_as_the_sdk(name: str, params: dict[str, Any]) -> None:
    import acp.schema

    assert _validate(getattr(requests, name), params) == _validate(getattr(acp.schema, name), params)
