"""Strict request parsing with the legacy status codes (behavior §1.3).

JSON bodies: 415 without a JSON content type, 400 for invalid JSON, 422 for the wrong shape.
Query strings: booleans exactly ``true``/``false``, non-negative integers, both spellings of the
dual-named parameters accepted, but not both at once.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar
from urllib.parse import unquote

from fastapi import Request
from pydantic import BaseModel, ValidationError

from app.errors import RequestFormatError

M = TypeVar("M", bound=BaseModel)

# serde_json's nesting limit: the legacy server refused deeper documents with a 400.
MAX_JSON_DEPTH = 128
# Query integers are u64 for the legacy server; the store counts in signed 64 bits.
U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


def path_param(value: str) -> str:
    """Path parameters arrive still percent-encoded (see EncodedPathMiddleware)."""
    return unquote(value)


def is_json_content_type(value: str | None) -> bool:
    if not value:
        return False
    mime = value.split(";", 1)[0].strip().lower()
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))


async def json_body(request: Request, model: type[M]) -> M:
    if not is_json_content_type(request.headers.get("content-type")):
        raise RequestFormatError("Expected request with `Content-Type: application/json`", 415)
    body = await request.body()
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise RequestFormatError(f"Failed to parse the request body as JSON: {exc}", 400) from exc
    except RecursionError as exc:
        raise RequestFormatError("Failed to parse the request body as JSON: recursion limit exceeded", 400) from exc
    check_json_text(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors())
        raise RequestFormatError(f"Failed to deserialize the JSON body into the target type: {errors}", 422) from exc


def check_json_text(data: Any) -> None:
    """What serde refused but Python's parser accepts: lone UTF-16 surrogates (in any string or key;
    a valid pair is already one code point) and nesting deeper than ``MAX_JSON_DEPTH``. Neither can
    be stored or sent on as UTF-8, so both are a 400 like any other invalid JSON."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise RequestFormatError(
                    "Failed to parse the request body as JSON: lone leading surrogate in hex escape", 400
                )
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_JSON_DEPTH:
            raise RequestFormatError("Failed to parse the request body as JSON: recursion limit exceeded", 400)
        if isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, depth))
                stack.append((item, depth + 1))
        else:
            stack.extend((item, depth + 1) for item in value)


class Query:
    """The query string of one request, read with the legacy rules."""

    def __init__(self, request: Request) -> None:
        # Most requests have no query string: nothing to parse then.
        self._items = request.query_params.multi_items() if request.scope.get("query_string") else []

    def _get(self, *names: str) -> str | None:
        found = [(k, v) for k, v in self._items if k in names]
        keys = {k for k, _ in found}
        if len(found) > 1:
            raise RequestFormatError(f"Failed to deserialize query string: duplicate field `{names[0]}`", 400)
        if len(keys) > 1:
            raise RequestFormatError(f"Failed to deserialize query string: duplicate field `{names[0]}`", 400)
        return found[0][1] if found else None

    def string(self, *names: str, required: bool = False) -> str | None:
        value = self._get(*names)
        if value is None and required:
            raise RequestFormatError(f"Failed to deserialize query string: missing field `{names[0]}`", 400)
        return value

    def boolean(self, *names: str, default: bool = False) -> bool:
        value = self._get(*names)
        if value is None:
            return default
        if value == "true":
            return True
        if value == "false":
            return False
        raise RequestFormatError(
            f"Failed to deserialize query string: {names[0]}: provided string was not `true` or `false`", 400
        )

    def integer(self, name: str) -> int | None:
        value = self._get(name)
        if value is None:
            return None
        # ASCII digits only: str.isdigit() also takes "²" and "١٢", which int() then refuses.
        if not (value.isascii() and value.isdigit()):
            raise RequestFormatError(f"Failed to deserialize query string: {name}: invalid digit found in string", 400)
        number = int(value)
        if number > U64_MAX:
            raise RequestFormatError(
                f"Failed to deserialize query string: {name}: number too large to fit in target type", 400
            )
        return min(number, I64_MAX)  # no sequence comes near it; the store's integers are signed 64-bit

    def include_raw(self) -> bool:
        return self.boolean("include_raw", "includeRaw")

    def session_id(self) -> str | None:
        return self.string("session_id", "sessionId")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
