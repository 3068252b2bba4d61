"""The ACP shapes the bridge reads most, as ``TypedDict``s of the JSON it receives.

They describe what a well-behaved agent sends; the code still checks each field before use, since
an agent may send anything (the SDK's pydantic models are not loaded on the hot path, see ``sdk.py``).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class SessionMode(TypedDict):
    id: str
    name: NotRequired[str]
    description: NotRequired[str | None]


class SessionModeState(TypedDict):
    currentModeId: str
    availableModes: list[SessionMode]


class ConfigOptionValue(TypedDict):
    value: str
    name: NotRequired[str]


class ConfigOption(TypedDict):
    id: str
    category: NotRequired[str]
    currentValue: NotRequired[str]
    options: NotRequired[list[ConfigOptionValue]]


class InitializeResult(TypedDict, total=False):
    protocolVersion: int
    agentCapabilities: dict[str, Any]
    agentInfo: dict[str, Any]
    authMethods: list[Any]


class NewSessionResult(TypedDict):
    sessionId: str
    modes: NotRequired[SessionModeState | None]
    configOptions: NotRequired[list[ConfigOption] | None]
    _meta: NotRequired[dict[str, Any]]
