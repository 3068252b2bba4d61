"""Strict request parsing with the legacy status codes (behavior §1.3).

JSON bodies: 415 without a JSON content type, 400 for invalid JSON, 422 for the wrong shape.
Query strings: booleans exactly ``true``/``false``, non-negative integers, both spellings of the
dual-named parameters accepted, but not both at once.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar
from urllib.parse import unquote

from fastapi import Request
from pydantic import BaseModel, ValidationError

from app.errors import RequestFormatError

M = TypeVar("M", bound=BaseModel)


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
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors())
        raise RequestFormatError(f"Failed to deserialize the JSON body into the target type: {errors}", 422) from exc


class Query:
    """The query string of one request, read with the legacy rules."""

    def __init__(self, request: Request) -> None:
        self._items = request.query_params.multi_items()

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
        if not value.isdigit():
            raise RequestFormatError(f"Failed to deserialize query string: {name}: invalid digit found in string", 400)
        return int(value)

    def include_raw(self) -> bool:
        return self.boolean("include_raw", "includeRaw")

    def session_id(self) -> str | None:
        return self.string("session_id", "sessionId")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
