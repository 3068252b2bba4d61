"""The connection's line parser gives what json.loads gives: values and error messages."""

from __future__ import annotations

import json

import pytest

from app.acp.connection import parse_json

LINES = [
    '{"jsonrpc":"2.0","method":"session/update","params":{}}',
    "[1,2]",
    '"s"',
    "1e400",
    "NaN",
    "12345678901234567890123",
    '{"a":"\\ud800"}',
    '  {"a":1}',
    '{"a":1}  ',
    "\t[1]\n",
    "",
    " ",
    "x",
    '{"a":',
    '{"a":1} x',
    '{"a":1}{"b":2}',
    "\u00a0{}",
]


def _outcome(parse: object, line: str) -> tuple[str, object]:
    try:
        value = parse(line)  # type: ignore[operator]
    except ValueError as exc:
        return "error", str(exc)
    return "value", repr(value)


@pytest.mark.parametrize("line", LINES)
def test_same_as_json_loads(line: str) -> None:
    assert _outcome(parse_json, line) == _outcome(json.loads, line)
