"""The API's schemas as TypedDicts, generated from openapi/openapi.json: do not edit.

Remake: .venv/bin/python clients/python/generate_models.py
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

ErrorType: TypeAlias = Literal[
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
]


EventSource: TypeAlias = Literal["agent", "daemon"]


FileAction: TypeAlias = Literal["read", "write", "patch"]


FsEntryType: TypeAlias = Literal["file", "directory"]


ItemKind: TypeAlias = Literal["message", "tool_call", "tool_result", "system", "status", "unknown"]


ItemRole: TypeAlias = Literal["user", "assistant", "system", "tool"]


ItemStatus: TypeAlias = Literal["in_progress", "completed", "failed"]


McpRemoteTransport: TypeAlias = Literal["http", "sse"]


PermissionReply: TypeAlias = Literal["once", "always", "reject"]


PermissionStatus: TypeAlias = Literal["requested", "accept", "accept_for_session", "reject"]


QuestionStatus: TypeAlias = Literal["requested", "answered", "rejected"]


ReasoningVisibility: TypeAlias = Literal["public", "private"]


ServerStatus: TypeAlias = Literal["running", "stopped", "error"]
"""
State of an agent's shared server process
"""


SessionEndReason: TypeAlias = Literal["completed", "error", "terminated"]


TerminatedBy: TypeAlias = Literal["agent", "daemon"]


TurnPhase: TypeAlias = Literal["started", "ended"]


UniversalEventType: TypeAlias = Literal[
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
]


class McpOAuthConfig(TypedDict):
    clientId: NotRequired[str | None]
    clientSecret: NotRequired[str | None]
    scope: NotRequired[str | None]


McpOAuthConfigOrDisabled: TypeAlias = McpOAuthConfig | bool


McpCommand: TypeAlias = str | list[str]


class McpServerConfigLocal(TypedDict):
    type: Literal["local"]
    command: McpCommand
    args: NotRequired[list[str]]
    env: NotRequired[dict[str, str] | None]
    enabled: NotRequired[bool | None]
    timeoutMs: NotRequired[int | None]
    cwd: NotRequired[str | None]


class McpServerConfigRemote(TypedDict):
    type: Literal["remote"]
    url: str
    headers: NotRequired[dict[str, str] | None]
    bearerTokenEnvVar: NotRequired[str | None]
    envHeaders: NotRequired[dict[str, str] | None]
    oauth: NotRequired[McpOAuthConfigOrDisabled | None]
    enabled: NotRequired[bool | None]
    timeoutMs: NotRequired[int | None]
    transport: NotRequired[McpRemoteTransport | None]


McpServerConfig: TypeAlias = McpServerConfigLocal | McpServerConfigRemote


class SkillSource(TypedDict):
    type: str
    source: str
    skills: NotRequired[list[str] | None]
    ref: NotRequired[str | None]
    subpath: NotRequired[str | None]


class SkillsConfig(TypedDict):
    sources: list[SkillSource]


class CreateSessionRequest(TypedDict):
    agent: str
    agentMode: NotRequired[str | None]
    permissionMode: NotRequired[str | None]
    model: NotRequired[str | None]
    variant: NotRequired[str | None]
    agentVersion: NotRequired[str | None]
    directory: NotRequired[str | None]
    title: NotRequired[str | None]
    mcp: NotRequired[dict[str, McpServerConfig] | None]
    skills: NotRequired[SkillsConfig | None]


class MessageAttachment(TypedDict):
    path: str
    mime: NotRequired[str | None]
    filename: NotRequired[str | None]


class MessageRequest(TypedDict):
    message: str
    attachments: NotRequired[list[MessageAttachment]]


class PermissionReplyRequest(TypedDict):
    reply: PermissionReply


class QuestionReplyRequest(TypedDict):
    answers: list[list[str]]


class AgentInstallRequest(TypedDict):
    reinstall: NotRequired[bool | None]


FsMoveRequest = TypedDict(
    "FsMoveRequest",
    {
        "from": str,
        "to": str,
        "overwrite": NotRequired[bool | None],
    },
)


class EventsQuery(TypedDict):
    offset: NotRequired[int | None]
    limit: NotRequired[int | None]
    includeRaw: NotRequired[bool | None]


class TurnStreamQuery(TypedDict):
    includeRaw: NotRequired[bool | None]


class FsEntriesQuery(TypedDict):
    path: NotRequired[str | None]
    sessionId: NotRequired[str | None]


class FsPathQuery(TypedDict):
    path: str
    sessionId: NotRequired[str | None]


class FsDeleteQuery(TypedDict):
    path: str
    sessionId: NotRequired[str | None]
    recursive: NotRequired[bool | None]


class FsSessionQuery(TypedDict):
    sessionId: NotRequired[str | None]


class FsUploadBatchQuery(TypedDict):
    path: NotRequired[str | None]
    sessionId: NotRequired[str | None]


class FsEntry(TypedDict):
    name: str
    path: str
    entryType: FsEntryType
    size: int
    modified: NotRequired[str | None]


class FsStat(TypedDict):
    path: str
    entryType: FsEntryType
    size: int
    modified: NotRequired[str | None]


class FsWriteResponse(TypedDict):
    path: str
    bytesWritten: int


class FsActionResponse(TypedDict):
    path: str


FsMoveResponse = TypedDict(
    "FsMoveResponse",
    {
        "from": str,
        "to": str,
    },
)


class FsUploadBatchResponse(TypedDict):
    paths: list[str]
    truncated: bool


class HealthResponse(TypedDict):
    status: str


class AgentCapabilities(TypedDict):
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
    """
    Whether the agent runs one server process shared by its sessions
    """


class ServerStatusInfo(TypedDict):
    status: ServerStatus
    baseUrl: NotRequired[str | None]
    uptimeMs: NotRequired[int | None]
    restartCount: int
    lastError: NotRequired[str | None]


class AgentInfo(TypedDict):
    id: str
    installed: bool
    credentialsAvailable: bool
    """
    Whether the credentials the agent needs are available
    """
    version: NotRequired[str | None]
    path: NotRequired[str | None]
    capabilities: AgentCapabilities
    serverStatus: NotRequired[ServerStatusInfo | None]


class AgentListResponse(TypedDict):
    agents: list[AgentInfo]


class AgentModeInfo(TypedDict):
    id: str
    name: str
    description: str


class AgentModesResponse(TypedDict):
    modes: list[AgentModeInfo]


class AgentModelInfo(TypedDict):
    id: str
    name: NotRequired[str | None]
    variants: NotRequired[list[str] | None]
    defaultVariant: NotRequired[str | None]


class AgentModelsResponse(TypedDict):
    models: list[AgentModelInfo]
    defaultModel: NotRequired[str | None]


class SessionInfo(TypedDict):
    sessionId: str
    agent: str
    agentMode: str
    permissionMode: str
    model: NotRequired[str | None]
    variant: NotRequired[str | None]
    nativeSessionId: NotRequired[str | None]
    ended: bool
    eventCount: int
    createdAt: int
    updatedAt: int
    directory: NotRequired[str | None]
    title: NotRequired[str | None]
    mcp: NotRequired[dict[str, McpServerConfig] | None]
    skills: NotRequired[SkillsConfig | None]


class SessionListResponse(TypedDict):
    sessions: list[SessionInfo]


class AgentError(TypedDict):
    type: ErrorType
    message: str
    agent: NotRequired[str | None]
    session_id: NotRequired[str | None]
    details: NotRequired[Any | None]


class CreateSessionResponse(TypedDict):
    healthy: bool
    nativeSessionId: NotRequired[str | None]
    error: NotRequired[AgentError | None]


class ContentPartText(TypedDict):
    type: Literal["text"]
    text: str


class ContentPartJson(TypedDict):
    type: Literal["json"]
    json: Any


class ContentPartToolCall(TypedDict):
    type: Literal["tool_call"]
    name: str
    arguments: str
    call_id: str


class ContentPartToolResult(TypedDict):
    type: Literal["tool_result"]
    call_id: str
    output: str


class ContentPartFileRef(TypedDict):
    type: Literal["file_ref"]
    path: str
    action: FileAction
    diff: NotRequired[str | None]


class ContentPartReasoning(TypedDict):
    type: Literal["reasoning"]
    text: str
    visibility: ReasoningVisibility


class ContentPartImage(TypedDict):
    type: Literal["image"]
    path: str
    mime: NotRequired[str | None]


class ContentPartStatus(TypedDict):
    type: Literal["status"]
    label: str
    detail: NotRequired[str | None]


ContentPart: TypeAlias = (
    ContentPartText
    | ContentPartJson
    | ContentPartToolCall
    | ContentPartToolResult
    | ContentPartFileRef
    | ContentPartReasoning
    | ContentPartImage
    | ContentPartStatus
)


class UniversalItem(TypedDict):
    item_id: str
    native_item_id: NotRequired[str | None]
    parent_id: NotRequired[str | None]
    kind: ItemKind
    role: NotRequired[ItemRole | None]
    content: list[ContentPart]
    status: ItemStatus


class TurnEventData(TypedDict):
    phase: TurnPhase
    turn_id: NotRequired[str | None]
    metadata: NotRequired[Any | None]


class SessionStartedData(TypedDict):
    metadata: NotRequired[Any | None]


class StderrOutput(TypedDict):
    head: NotRequired[str | None]
    """
    The first lines of stderr, or all of it when not truncated
    """
    tail: NotRequired[str | None]
    """
    The last lines of stderr (only when truncated)
    """
    total_lines: NotRequired[int | None]
    """
    Number of lines stderr had
    """
    truncated: bool
    """
    Whether lines were left out
    """


class SessionEndedData(TypedDict):
    reason: SessionEndReason
    terminated_by: TerminatedBy
    message: NotRequired[str | None]
    """
    Error message when the reason is `error`
    """
    exit_code: NotRequired[int | None]
    """
    The agent's exit code when the reason is `error`
    """
    stderr: NotRequired[StderrOutput | None]


class ItemEventData(TypedDict):
    item: UniversalItem


class ItemDeltaData(TypedDict):
    item_id: str
    native_item_id: NotRequired[str | None]
    delta: str


class ErrorData(TypedDict):
    message: str
    code: NotRequired[str | None]
    details: NotRequired[Any | None]


class PermissionEventData(TypedDict):
    permission_id: str
    action: str
    status: PermissionStatus
    metadata: NotRequired[Any | None]


class QuestionEventData(TypedDict):
    question_id: str
    prompt: str
    options: list[str]
    response: NotRequired[str | None]
    status: QuestionStatus


class AgentUnparsedData(TypedDict):
    error: str
    location: str
    raw_hash: NotRequired[str | None]


UniversalEventData: TypeAlias = (
    TurnEventData
    | SessionEndedData
    | ItemEventData
    | ItemDeltaData
    | ErrorData
    | PermissionEventData
    | QuestionEventData
    | AgentUnparsedData
    | SessionStartedData
)


class ProblemDetails(TypedDict):
    type: str
    title: str
    status: int
    detail: NotRequired[str | None]
    instance: NotRequired[str | None]


class SessionStartedEvent(TypedDict):
    """
    An event of type `session.started`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["session.started"]
    data: SessionStartedData
    raw: NotRequired[Any | None]


class SessionEndedEvent(TypedDict):
    """
    An event of type `session.ended`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["session.ended"]
    data: SessionEndedData
    raw: NotRequired[Any | None]


class TurnStartedEvent(TypedDict):
    """
    An event of type `turn.started`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["turn.started"]
    data: TurnEventData
    raw: NotRequired[Any | None]


class TurnEndedEvent(TypedDict):
    """
    An event of type `turn.ended`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["turn.ended"]
    data: TurnEventData
    raw: NotRequired[Any | None]


class ItemStartedEvent(TypedDict):
    """
    An event of type `item.started`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["item.started"]
    data: ItemEventData
    raw: NotRequired[Any | None]


class ItemDeltaEvent(TypedDict):
    """
    An event of type `item.delta`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["item.delta"]
    data: ItemDeltaData
    raw: NotRequired[Any | None]


class ItemCompletedEvent(TypedDict):
    """
    An event of type `item.completed`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["item.completed"]
    data: ItemEventData
    raw: NotRequired[Any | None]


class ErrorEvent(TypedDict):
    """
    An event of type `error`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["error"]
    data: ErrorData
    raw: NotRequired[Any | None]


class PermissionRequestedEvent(TypedDict):
    """
    An event of type `permission.requested`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["permission.requested"]
    data: PermissionEventData
    raw: NotRequired[Any | None]


class PermissionResolvedEvent(TypedDict):
    """
    An event of type `permission.resolved`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["permission.resolved"]
    data: PermissionEventData
    raw: NotRequired[Any | None]


class QuestionRequestedEvent(TypedDict):
    """
    An event of type `question.requested`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["question.requested"]
    data: QuestionEventData
    raw: NotRequired[Any | None]


class QuestionResolvedEvent(TypedDict):
    """
    An event of type `question.resolved`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["question.resolved"]
    data: QuestionEventData
    raw: NotRequired[Any | None]


class AgentUnparsedEvent(TypedDict):
    """
    An event of type `agent.unparsed`.
    """

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[str | None]
    synthetic: bool
    source: EventSource
    type: Literal["agent.unparsed"]
    data: AgentUnparsedData
    raw: NotRequired[Any | None]


UniversalEvent: TypeAlias = (
    SessionStartedEvent
    | SessionEndedEvent
    | TurnStartedEvent
    | TurnEndedEvent
    | ItemStartedEvent
    | ItemDeltaEvent
    | ItemCompletedEvent
    | ErrorEvent
    | PermissionRequestedEvent
    | PermissionResolvedEvent
    | QuestionRequestedEvent
    | QuestionResolvedEvent
    | AgentUnparsedEvent
)
"""
An event: checking `type` tells which `data` it has.
"""


class EventsResponse(TypedDict):
    events: list[UniversalEvent]
    hasMore: bool
