"""Params of the agent->client requests the bridge serves with typed fields (ACP schema names).

These are the ACP schema's definitions of ``fs/read_text_file``, ``fs/write_text_file`` and
``terminal/create`` params, validated as the SDK's models validate them (pydantic, with the
schema's lenient fields: a malformed optional value becomes its default, bad list items are
dropped; a failure becomes the SDK's -32602 Invalid params answer). They are declared here because
the SDK's schema module, where its versions live, comes only with all of its several hundred models
(see ``sdk``); ``tests/unit/test_acp_requests.py`` holds the two to the same verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator


# The schema's `x-deserialize-default-on-error` and `x-deserialize-skip-invalid-items`, as the SDK's
# generated models apply them (its helpers for this are private to it).
def salvage_on_error(value: Any, handler: Callable[[Any], Any], fallback: Callable[[], Any]) -> Any:
    """The validated value, or ``fallback()`` when it does not validate."""
    try:
        return handler(value)
    except ValidationError:
        return fallback()


def skip_invalid_items(value: Any, handler: Callable[[Any], Any]) -> Any:
    """A list without the items that do not validate (each validated through the field's handler)."""
    if not isinstance(value, list):
        return handler(value)
    kept: list[Any] = []
    for item in value:
        try:
            kept.append(handler([item])[0])
        except ValidationError:
            continue
    return kept


class _Params(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    field_meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ReadTextFileRequest(_Params):
    session_id: str = Field(alias="sessionId")
    path: str
    line: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=0)

    @field_validator("line", "limit", mode="wrap")
    @classmethod
    def _default_on_error(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return salvage_on_error(value, handler, lambda: None)


class WriteTextFileRequest(_Params):
    session_id: str = Field(alias="sessionId")
    path: str
    content: str


class EnvVariable(_Params):
    name: str
    value: str


class CreateTerminalRequest(_Params):
    session_id: str = Field(alias="sessionId")
    command: str
    args: list[str] | None = None
    env: list[EnvVariable] | None = None
    cwd: str | None = None
    output_byte_limit: int | None = Field(default=None, alias="outputByteLimit", ge=0)

    @field_validator("cwd", "output_byte_limit", mode="wrap")
    @classmethod
    def _default_on_error(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return salvage_on_error(value, handler, lambda: None)

    @field_validator("args", "env", mode="wrap")
    @classmethod
    def _skip_invalid_items(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return skip_invalid_items(value, handler)
