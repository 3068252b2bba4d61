"""A typed client for the sandbox-agent v0.1 REST API served by acp-rest-bridge.

``SandboxAgent`` (sync) and ``AsyncSandboxAgent`` (asyncio) have the legacy TypeScript SDK's methods
under Python names; responses are the contract's shapes (``models``, events narrowed by their
``type``); everything raised is a ``SandboxAgentError`` (``errors``).
"""

from . import models
from .async_client import AsyncSandboxAgent
from .calls import tar_directory
from .client import SandboxAgent
from .errors import (
    AgentNotInstalledError,
    AgentProcessExitedError,
    AgentTimeoutError,
    ConnectError,
    ConnectionLostError,
    InstallFailedError,
    InternalError,
    InvalidRequestError,
    ModeNotSupportedError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    RequestTimeoutError,
    SandboxAgentError,
    ServerError,
    ServiceUnavailableError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    StreamError,
    TokenInvalidError,
    TransportError,
    UnsupportedAgentError,
)
from .spawn import BridgeProcess, SpawnError
from .streams import AsyncEventStream, EventStream

__all__ = [
    "AgentNotInstalledError",
    "AgentProcessExitedError",
    "AgentTimeoutError",
    "AsyncEventStream",
    "AsyncSandboxAgent",
    "BridgeProcess",
    "ConnectError",
    "ConnectionLostError",
    "EventStream",
    "InstallFailedError",
    "InternalError",
    "InvalidRequestError",
    "ModeNotSupportedError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProtocolError",
    "RequestTimeoutError",
    "SandboxAgent",
    "SandboxAgentError",
    "ServerError",
    "ServiceUnavailableError",
    "SessionAlreadyExistsError",
    "SessionNotFoundError",
    "SpawnError",
    "StreamError",
    "TokenInvalidError",
    "TransportError",
    "UnsupportedAgentError",
    "models",
    "tar_directory",
]
