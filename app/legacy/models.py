"""Pydantic models of the legacy schema; class and field names as in the legacy openapi.json.

Request models validate bodies (unknown fields ignored). Response models document the API; the
handlers build response JSON themselves so that "null" and "omitted" stay exactly as legacy had them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator


class _Model(BaseModel):
    # strict: JSON types are taken as they are (no "yes" for a boolean, no "5" for a number), as the
    # legacy server's serde did; a mismatch is its 422.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, strict=True)


# ---- requests ---------------------------------------------------------------------------------
class McpOAuthConfig(_Model):
    clientId: str | None = None
    clientSecret: str | None = None
    scope: str | None = None


class McpLocalServerConfig(_Model):
    type: Literal["local"]
    command: str | list[str]
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(default=None, validation_alias=AliasChoices("env", "environment"))
    enabled: bool | None = None
    timeoutMs: int | None = Field(default=None, validation_alias=AliasChoices("timeoutMs", "timeout"))
    cwd: str | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return "local" if v == "stdio" else v


class McpRemoteServerConfig(_Model):
    type: Literal["remote"]
    url: str
    headers: dict[str, str] | None = None
    bearerTokenEnvVar: str | None = Field(
        default=None, validation_alias=AliasChoices("bearerTokenEnvVar", "bearer_token_env_var")
    )
    envHeaders: dict[str, str] | None = Field(
        default=None, validation_alias=AliasChoices("envHeaders", "envHttpHeaders", "env_http_headers")
    )
    oauth: McpOAuthConfig | Literal[False] | None = None
    enabled: bool | None = None
    timeoutMs: int | None = Field(default=None, validation_alias=AliasChoices("timeoutMs", "timeout"))
    transport: Literal["http", "sse"] | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return "remote" if v == "http" else v


McpServerConfig = McpLocalServerConfig | McpRemoteServerConfig


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
    attachments: list[MessageAttachment] | None = None


class PermissionReplyRequest(_Model):
    reply: Literal["once", "always", "reject"]


class QuestionReplyRequest(_Model):
    answers: list[list[str]]


class AgentInstallRequest(_Model):
    reinstall: bool | None = None


class FsMoveRequest(_Model):
    from_: str = Field(alias="from")
    to: str
    overwrite: bool | None = None


# ---- filesystem responses (documentation) ------------------------------------------------------
FsEntryType = Literal["file", "directory"]


class FsEntry(_Model):
    name: str
    path: str
    entryType: FsEntryType
    size: int = Field(ge=0)
    modified: str | None = None


class FsStat(_Model):
    path: str
    entryType: FsEntryType
    size: int = Field(ge=0)
    modified: str | None = None


class FsWriteResponse(_Model):
    path: str
    bytesWritten: int = Field(ge=0)


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
    sharedProcess: bool


class ServerStatusInfo(_Model):
    status: Literal["running", "stopped", "error"]
    baseUrl: str | None = None
    uptimeMs: int | None = None
    restartCount: int
    lastError: str | None = None


class AgentInfo(_Model):
    id: str
    installed: bool
    credentialsAvailable: bool
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
    model: str | None
    variant: str | None
    nativeSessionId: str | None
    ended: bool
    eventCount: int
    createdAt: int
    updatedAt: int
    directory: str | None
    title: str | None
    mcp: dict[str, McpServerConfig] | None = None
    skills: SkillsConfig | None = None


class SessionListResponse(_Model):
    sessions: list[SessionInfo]


class CreateSessionResponse(_Model):
    healthy: bool
    nativeSessionId: str | None = None


class UniversalEvent(_Model):
    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: str | None
    synthetic: bool
    source: Literal["agent", "daemon"]
    type: str
    data: dict[str, Any]
    raw: Any = None


class EventsResponse(_Model):
    events: list[UniversalEvent]
    hasMore: bool


class ProblemDetails(_Model):
    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
