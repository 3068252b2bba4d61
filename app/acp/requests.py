"""Params of the agent->client requests the bridge serves with typed fields (ACP schema names).

These are the ACP schema's definitions of ``fs/read_text_file``, ``fs/write_text_file`` and
``terminal/create`` params, validated as the SDK's models validate them (pydantic, with the
schema's lenient fields: a malformed optional value becomes its default, bad list items are
dropped; a failure becomes the SDK's -32602 Invalid params answer). They are declared here because
the SDK's schema module, where its versions live, comes only with all of its several hundred models
(see ``sdk``); ``tests/unit/test_acp_requests.py`` holds the two to the same verdicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, field_validator

from .sdk import salvage_on_error, skip_invalid_items


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
