"""Pydantic models of the legacy schema; class and field names as in the legacy openapi.json.

Request models validate bodies (unknown fields ignored). Response models document the API; the
handlers build response JSON themselves so that "null" and "omitted" stay exactly as legacy had them.
Every name in ``LEGACY_SCHEMAS`` is a component of the served OpenAPI document (``app.legacy.openapi``);
models whose names start with ``_`` are variants that the document shows inline.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from annotated_types import Ge
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, WithJsonSchema, field_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from typing_extensions import TypeAliasType


class Doc:
    """Extra JSON-schema keywords for the OpenAPI document (``format``, ``discriminator``...)."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), **self.keywords}


Int32 = Annotated[int, Doc(format="int32")]
UInt32 = Annotated[int, Ge(0), Doc(format="int32")]
Int64 = Annotated[int, Doc(format="int64")]
UInt64 = Annotated[int, Ge(0), Doc(format="int64")]
UInt = Annotated[int, Ge(0)]


class _Model(BaseModel):
    # strict: JSON types are taken as they are (no "yes" for a boolean, no "5" for a number), as the
    # legacy server's serde did; a mismatch is its 422.
    # defer_build: most of these models only document the API; each is built on its first use.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, strict=True, defer_build=True)


# ---- enumerations ------------------------------------------------------------------------------
ErrorType = TypeAliasType(
    "ErrorType",
    Literal[
        "invalid_request",
        "unsupported_agent",
        "agent_not_installed",
        "install_failed",
        "agent_process_exited",
        "token_invalid",
        "permission_denied",
        "session_not_found",
        "session_already_exists",
        "mode_not_supported",
        "stream_error",
        "timeout",
    ],
)
EventSource = TypeAliasType("EventSource", Literal["agent", "daemon"])
FileAction = TypeAliasType("FileAction", Literal["read", "write", "patch"])
FsEntryType = TypeAliasType("FsEntryType", Literal["file", "directory"])
ItemKind = TypeAliasType("ItemKind", Literal["message", "tool_call", "tool_result", "system", "status", "unknown"])
ItemRole = TypeAliasType("ItemRole", Literal["user", "assistant", "system", "tool"])
ItemStatus = TypeAliasType("ItemStatus", Literal["in_progress", "completed", "failed"])
McpRemoteTransport = TypeAliasType("McpRemoteTransport", Literal["http", "sse"])
PermissionReply = TypeAliasType("PermissionReply", Literal["once", "always", "reject"])
PermissionStatus = TypeAliasType("PermissionStatus", Literal["requested", "accept", "accept_for_session", "reject"])
QuestionStatus = TypeAliasType("QuestionStatus", Literal["requested", "answered", "rejected"])
ReasoningVisibility = TypeAliasType("ReasoningVisibility", Literal["public", "private"])
ServerStatus = TypeAliasType(
    "ServerStatus",
    Annotated[Literal["running", "stopped", "error"], Doc(description="State of an agent's shared server process")],
)
SessionEndReason = TypeAliasType("SessionEndReason", Literal["completed", "error", "terminated"])
TerminatedBy = TypeAliasType("TerminatedBy", Literal["agent", "daemon"])
TurnPhase = TypeAliasType("TurnPhase", Literal["started", "ended"])
UniversalEventType = TypeAliasType(
    "UniversalEventType",
    Literal[
        "session.started",
        "session.ended",
        "turn.started",
        "turn.ended",
        "item.started",
        "item.delta",
        "item.completed",
        "error",
        "permission.requested",
        "permission.resolved",
        "question.requested",
        "question.resolved",
        "agent.unparsed",
    ],
)


# ---- requests ---------------------------------------------------------------------------------
class McpOAuthConfig(_Model):
    clientId: str | None = None
    clientSecret: str | None = None
    scope: str | None = None


# Only `false` means something (OAuth off); the legacy document types it as a boolean.
McpOAuthConfigOrDisabled = TypeAliasType(
    "McpOAuthConfigOrDisabled", McpOAuthConfig | Annotated[Literal[False], WithJsonSchema({"type": "boolean"})]
)
McpCommand = TypeAliasType("McpCommand", str | list[str])


class _McpLocalServerConfig(_Model):
    type: Literal["local"]
    command: McpCommand
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(default=None, validation_alias=AliasChoices("env", "environment"))
    enabled: bool | None = None
    timeoutMs: UInt64 | None = Field(default=None, validation_alias=AliasChoices("timeoutMs", "timeout"))
    cwd: str | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return "local" if v == "stdio" else v


class _McpRemoteServerConfig(_Model):
    type: Literal["remote"]
    url: str
    headers: dict[str, str] | None = None
    bearerTokenEnvVar: str | None = Field(
        default=None, validation_alias=AliasChoices("bearerTokenEnvVar", "bearer_token_env_var")
    )
    envHeaders: dict[str, str] | None = Field(
        default=None, validation_alias=AliasChoices("envHeaders", "envHttpHeaders", "env_http_headers")
    )
    oauth: McpOAuthConfigOrDisabled | None = None
    enabled: bool | None = None
    timeoutMs: UInt64 | None = Field(default=None, validation_alias=AliasChoices("timeoutMs", "timeout"))
    transport: McpRemoteTransport | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return "remote" if v == "http" else v


# Not a pydantic discriminated union: the `type` aliases (`stdio`, `http`) are mapped by the variants.
McpServerConfig = TypeAliasType(
    "McpServerConfig",
    Annotated[_McpLocalServerConfig | _McpRemoteServerConfig, Doc(discriminator={"propertyName": "type"})],
)


class SkillSource(_Model):
    type: str
    source: str
    skills: list[str] | None = None
    ref: str | None = None
    subpath: str | None = None


class SkillsConfig(_Model):
    sources: list[SkillSource]


class CreateSessionRequest(_Model):
    agent: str
    agentMode: str | None = None
    permissionMode: str | None = None
    model: str | None = None
    variant: str | None = None
    agentVersion: str | None = None
    directory: str | None = None
    title: str | None = None
    mcp: dict[str, McpServerConfig] | None = None
    skills: SkillsConfig | None = None

    def as_request(self) -> dict[str, Any]:
        """Plain values for the session layer; mcp/skills in their canonical echo form."""
        data: dict[str, Any] = {
            "agent": self.agent,
            "agentMode": self.agentMode,
            "permissionMode": self.permissionMode,
            "model": self.model,
            "variant": self.variant,
            "agentVersion": self.agentVersion,
            "directory": self.directory,
            "title": self.title,
            "mcp": None,
            "skills": None,
        }
        if self.mcp is not None:
            data["mcp"] = {
                name: cfg.model_dump(exclude_none=True) | ({"args": cfg.args} if cfg.type == "local" else {})
                for name, cfg in self.mcp.items()
            }
        if self.skills is not None:
            data["skills"] = self.skills.model_dump(exclude_none=True)
        return data


class MessageAttachment(_Model):
    path: str
    mime: str | None = None
    filename: str | None = None


class MessageRequest(_Model):
    message: str
    attachments: list[MessageAttachment] = Field(default_factory=list)


class PermissionReplyRequest(_Model):
    reply: PermissionReply


class QuestionReplyRequest(_Model):
    answers: list[list[str]]


class AgentInstallRequest(_Model):
    reinstall: bool | None = None


class FsMoveRequest(_Model):
    from_: str = Field(alias="from")
    to: str
    overwrite: bool | None = None


# ---- query strings (documentation: the handlers read them with app.api.parsing.Query) ----------
# A parameter's name is the snake_case of its property (`sessionId` -> `session_id`); the server
# accepts both spellings.
class EventsQuery(_Model):
    offset: UInt64 | None = None
    limit: UInt64 | None = None
    includeRaw: bool | None = None


class TurnStreamQuery(_Model):
    includeRaw: bool | None = None


class FsEntriesQuery(_Model):
    path: str | None = None
    sessionId: str | None = None


class FsPathQuery(_Model):
    path: str
    sessionId: str | None = None


class FsDeleteQuery(_Model):
    path: str
    sessionId: str | None = None
    recursive: bool | None = None


class FsSessionQuery(_Model):
    sessionId: str | None = None


class FsUploadBatchQuery(_Model):
    path: str | None = None
    sessionId: str | None = None


# ---- filesystem responses (documentation) ------------------------------------------------------
class FsEntry(_Model):
    name: str
    path: str
    entryType: FsEntryType
    size: UInt64
    modified: str | None = None


class FsStat(_Model):
    path: str
    entryType: FsEntryType
    size: UInt64
    modified: str | None = None


class FsWriteResponse(_Model):
    path: str
    bytesWritten: UInt64


class FsActionResponse(_Model):
    path: str


class FsMoveResponse(_Model):
    from_: str = Field(alias="from")
    to: str


class FsUploadBatchResponse(_Model):
    paths: list[str]
    truncated: bool


# ---- responses (documentation) -----------------------------------------------------------------
class HealthResponse(_Model):
    status: str


class AgentCapabilities(_Model):
    planMode: bool
    permissions: bool
    questions: bool
    toolCalls: bool
    toolResults: bool
    textMessages: bool
    images: bool
    fileAttachments: bool
    sessionLifecycle: bool
    errorEvents: bool
    reasoning: bool
    status: bool
    commandExecution: bool
    fileChanges: bool
    mcpTools: bool
    streamingDeltas: bool
    itemStarted: bool
    sharedProcess: bool = Field(description="Whether the agent runs one server process shared by its sessions")


class ServerStatusInfo(_Model):
    status: ServerStatus
    baseUrl: str | None = None
    uptimeMs: UInt64 | None = None
    restartCount: UInt64
    lastError: str | None = None


class AgentInfo(_Model):
    id: str
    installed: bool
    credentialsAvailable: bool = Field(description="Whether the credentials the agent needs are available")
    version: str | None = None
    path: str | None = None
    capabilities: AgentCapabilities
    serverStatus: ServerStatusInfo | None = None


class AgentListResponse(_Model):
    agents: list[AgentInfo]


class AgentModeInfo(_Model):
    id: str
    name: str
    description: str


class AgentModesResponse(_Model):
    modes: list[AgentModeInfo]


class AgentModelInfo(_Model):
    id: str
    name: str | None = None
    variants: list[str] | None = None
    defaultVariant: str | None = None


class AgentModelsResponse(_Model):
    models: list[AgentModelInfo]
    defaultModel: str | None = None


class SessionInfo(_Model):
    sessionId: str
    agent: str
    agentMode: str
    permissionMode: str
    model: str | None = None
    variant: str | None = None
    nativeSessionId: str | None = None
    ended: bool
    eventCount: UInt64
    createdAt: Int64
    updatedAt: Int64
    directory: str | None = None
    title: str | None = None
    mcp: dict[str, McpServerConfig] | None = None
    skills: SkillsConfig | None = None


class SessionListResponse(_Model):
    sessions: list[SessionInfo]


class AgentError(_Model):
    type: ErrorType
    message: str
    agent: str | None = None
    session_id: str | None = None
    details: Any | None = None


class CreateSessionResponse(_Model):
    healthy: bool
    nativeSessionId: str | None = None
    error: AgentError | None = None


# ---- events ------------------------------------------------------------------------------------
class _TextPart(_Model):
    type: Literal["text"]
    text: str


class _JsonPart(_Model):
    type: Literal["json"]
    json_: Any = Field(alias="json")


class _ToolCallPart(_Model):
    type: Literal["tool_call"]
    name: str
    arguments: str
    call_id: str


class _ToolResultPart(_Model):
    type: Literal["tool_result"]
    call_id: str
    output: str


class _FileRefPart(_Model):
    type: Literal["file_ref"]
    path: str
    action: FileAction
    diff: str | None = None


class _ReasoningPart(_Model):
    type: Literal["reasoning"]
    text: str
    visibility: ReasoningVisibility


class _ImagePart(_Model):
    type: Literal["image"]
    path: str
    mime: str | None = None


class _StatusPart(_Model):
    type: Literal["status"]
    label: str
    detail: str | None = None


ContentPart = TypeAliasType(
    "ContentPart",
    Annotated[
        _TextPart
        | _JsonPart
        | _ToolCallPart
        | _ToolResultPart
        | _FileRefPart
        | _ReasoningPart
        | _ImagePart
        | _StatusPart,
        Doc(discriminator={"propertyName": "type"}),
    ],
)


class UniversalItem(_Model):
    item_id: str
    native_item_id: str | None = None
    parent_id: str | None = None
    kind: ItemKind
    role: ItemRole | None = None
    content: list[ContentPart]
    status: ItemStatus


class TurnEventData(_Model):
    phase: TurnPhase
    turn_id: str | None = None
    metadata: Any | None = None


class SessionStartedData(_Model):
    metadata: Any | None = None


class StderrOutput(_Model):
    head: str | None = Field(default=None, description="The first lines of stderr, or all of it when not truncated")
    tail: str | None = Field(default=None, description="The last lines of stderr (only when truncated)")
    total_lines: UInt | None = Field(default=None, description="Number of lines stderr had")
    truncated: bool = Field(description="Whether lines were left out")


class SessionEndedData(_Model):
    reason: SessionEndReason
    terminated_by: TerminatedBy
    message: str | None = Field(default=None, description="Error message when the reason is `error`")
    exit_code: Int32 | None = Field(default=None, description="The agent's exit code when the reason is `error`")
    stderr: StderrOutput | None = None


class ItemEventData(_Model):
    item: UniversalItem


class ItemDeltaData(_Model):
    item_id: str
    native_item_id: str | None = None
    delta: str


class ErrorData(_Model):
    message: str
    code: str | None = None
    details: Any | None = None


class PermissionEventData(_Model):
    permission_id: str
    action: str
    status: PermissionStatus
    metadata: Any | None = None


class QuestionEventData(_Model):
    question_id: str
    prompt: str
    options: list[str]
    response: str | None = None
    status: QuestionStatus


class AgentUnparsedData(_Model):
    error: str
    location: str
    raw_hash: str | None = None


# SessionStartedData (no required property) comes last: generated clients try the variants in order.
UniversalEventData = TypeAliasType(
    "UniversalEventData",
    TurnEventData
    | SessionEndedData
    | ItemEventData
    | ItemDeltaData
    | ErrorData
    | PermissionEventData
    | QuestionEventData
    | AgentUnparsedData
    | SessionStartedData,
)


class UniversalEvent(_Model):
    event_id: str
    sequence: UInt64
    time: str
    session_id: str
    native_session_id: str | None = None
    synthetic: bool
    source: EventSource
    type: UniversalEventType
    data: UniversalEventData
    raw: Any | None = None


class EventsResponse(_Model):
    events: list[UniversalEvent]
    hasMore: bool


class ProblemDetails(_Model):
    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: UInt32
    detail: str | None = None
    instance: str | None = None


# Every component of the OpenAPI document, by its legacy name.
LEGACY_SCHEMAS: dict[str, Any] = {
    name: value
    for name, value in dict(globals()).items()
    if not name.startswith("_")
    and (
        isinstance(value, TypeAliasType)
        or (isinstance(value, type) and issubclass(value, _Model) and value is not _Model)
    )
}
