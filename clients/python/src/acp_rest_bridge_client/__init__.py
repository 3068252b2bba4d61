"""A typed client for the sandbox-agent v0.1 REST API served by acp-rest-bridge.

``SandboxAgent`` (sync) and ``AsyncSandboxAgent`` (asyncio) have the legacy TypeScript SDK's methods
under Python names; responses are the contract's shapes (``models``); errors raise
``SandboxAgentError`` subclasses (``errors``).
"""

from . import models
from .async_client import AsyncEventStream, AsyncSandboxAgent
from .calls import tar_directory
from .client import EventStream, SandboxAgent
from .errors import (
    AgentNotInstalledError,
    AgentProcessExitedError,
    AgentTimeoutError,
    ConnectionLostError,
    InstallFailedError,
    InternalError,
    InvalidRequestError,
    ModeNotSupportedError,
    NotFoundError,
    PermissionDeniedError,
    SandboxAgentError,
    ServerError,
    ServiceUnavailableError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    StreamError,
    TokenInvalidError,
    UnsupportedAgentError,
)
from .spawn import BridgeProcess, SpawnError

__all__ = [
    "AgentNotInstalledError",
    "AgentProcessExitedError",
    "AgentTimeoutError",
    "AsyncEventStream",
    "AsyncSandboxAgent",
    "BridgeProcess",
    "ConnectionLostError",
    "EventStream",
    "InstallFailedError",
    "InternalError",
    "InvalidRequestError",
    "ModeNotSupportedError",
    "NotFoundError",
    "PermissionDeniedError",
    "SandboxAgent",
    "SandboxAgentError",
    "ServerError",
    "ServiceUnavailableError",
    "SessionAlreadyExistsError",
    "SessionNotFoundError",
    "SpawnError",
    "StreamError",
    "TokenInvalidError",
    "UnsupportedAgentError",
    "models",
    "tar_directory",
]
