"""Errors: everything the client raises is a ``SandboxAgentError``. A non-2xx answer raises a subclass
chosen by the ProblemDetails ``type`` (``urn:sandbox-agent:error:<name>``), else by the HTTP status; a
request that got no valid answer raises a ``TransportError`` subclass, the httpx error as its cause."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx

from .models import ProblemDetails

TYPE_PREFIX = "urn:sandbox-agent:error:"


class SandboxAgentError(Exception):
    """What the client raises; raised itself for an error status no subclass names (405, ...).

    ``status`` is the HTTP status (0 when there was no answer); ``problem`` is the ProblemDetails body
    (``None`` when the body was not one, or there was none); ``type``, ``title`` and ``detail`` are its
    members; ``response`` is the httpx response."""

    def __init__(self, status: int, problem: ProblemDetails | None, response: httpx.Response | None) -> None:
        self.status = status
        self.problem = problem
        self.response = response
        self.type: str | None = problem.get("type") if problem else None
        self.title: str | None = problem.get("title") if problem else None
        self.detail: str | None = problem.get("detail") if problem else None
        super().__init__(self.detail or self.title or f"request failed with status {status}")

    @property
    def error_type(self) -> str | None:
        """The legacy ErrorType (``session_not_found``, ...), from ``type``."""
        if self.type and self.type.startswith(TYPE_PREFIX):
            return self.type[len(TYPE_PREFIX) :]
        return None

    @property
    def details(self) -> Any:
        """The ``details`` extension member, when the server sent one."""
        return cast(dict[str, Any], self.problem).get("details") if self.problem else None


class InvalidRequestError(SandboxAgentError):
    """400 ``invalid_request`` (also 413, 415 and 422 body errors)."""


class UnsupportedAgentError(SandboxAgentError):
    """400 ``unsupported_agent``."""


class ModeNotSupportedError(SandboxAgentError):
    """400 ``mode_not_supported``."""


class TokenInvalidError(SandboxAgentError):
    """401 ``token_invalid``: the token is missing or wrong."""


class PermissionDeniedError(SandboxAgentError):
    """403 ``permission_denied`` (a path outside the filesystem roots, a refused request)."""


class NotFoundError(SandboxAgentError):
    """404 (an unknown path)."""


class AgentNotInstalledError(NotFoundError):
    """404 ``agent_not_installed``."""


class SessionNotFoundError(NotFoundError):
    """404 ``session_not_found``."""


class SessionAlreadyExistsError(SandboxAgentError):
    """409 ``session_already_exists``."""


class ServerError(SandboxAgentError):
    """5xx without a more specific class."""


class InstallFailedError(ServerError):
    """500 ``install_failed``."""


class AgentProcessExitedError(ServerError):
    """500 ``agent_process_exited``."""


class InternalError(ServerError):
    """500 ``internal_error``: the server failed unexpectedly (it logged the traceback)."""


class StreamError(ServerError):
    """502 ``stream_error``: the agent (or a filesystem operation) failed."""


class ServiceUnavailableError(ServerError):
    """503: the server is out of a resource it needs, or not ready yet. Try again later."""


class AgentTimeoutError(ServerError):
    """504 ``timeout``: the agent did not answer in time."""


class TransportError(SandboxAgentError):
    """The request got no valid answer: the connection failed or broke (``ReadError``, ...). ``status``
    is 0; ``request`` is the httpx request, when there was one; the httpx error is ``__cause__``."""

    def __init__(self, message: str, request: httpx.Request | None = None) -> None:
        super().__init__(0, None, None)
        self.args = (message,)
        self.request = request


class ConnectError(TransportError):
    """The server could not be reached: nothing listens there (a stopped server), the host is unknown
    or unreachable, or connecting took longer than the timeout's ``connect``."""


class RequestTimeoutError(TransportError):
    """Connected, but the server did not take the request or answer it within the client's timeout
    (a stream waits ``STREAM_READ_TIMEOUT`` between two bytes; the server sends keep-alives)."""


class ProtocolError(TransportError):
    """The answer was not valid HTTP, was cut before its end, or was not the JSON the contract says."""


class ConnectionLostError(ConnectError):
    """A stream could not be resumed: the server stayed unreachable through every retry."""


def transport_error(exc: httpx.RequestError) -> TransportError:
    """The client's error for an httpx error (raise it ``from`` that error)."""
    try:
        request: httpx.Request | None = exc.request
    except RuntimeError:  # an httpx error raised without a request
        request = None
    where = f"{request.method} {request.url}" if request is not None else "request"
    cls: type[TransportError]
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        cls, what = ConnectError, "cannot connect"
    elif isinstance(exc, httpx.TimeoutException):
        cls, what = RequestTimeoutError, "no answer in time"
    elif isinstance(exc, httpx.ProtocolError | httpx.DecodingError | httpx.TooManyRedirects):
        cls, what = ProtocolError, "invalid answer"
    else:
        cls, what = TransportError, "connection failed"
    return cls(f"{where}: {what}: {exc or type(exc).__name__}", request)


BY_TYPE: dict[str, type[SandboxAgentError]] = {
    "invalid_request": InvalidRequestError,
    "unsupported_agent": UnsupportedAgentError,
    "mode_not_supported": ModeNotSupportedError,
    "token_invalid": TokenInvalidError,
    "permission_denied": PermissionDeniedError,
    "agent_not_installed": AgentNotInstalledError,
    "session_not_found": SessionNotFoundError,
    "session_already_exists": SessionAlreadyExistsError,
    "install_failed": InstallFailedError,
    "agent_process_exited": AgentProcessExitedError,
    "internal_error": InternalError,
    "stream_error": StreamError,
    "service_unavailable": ServiceUnavailableError,
    "timeout": AgentTimeoutError,
}
BY_STATUS: dict[int, type[SandboxAgentError]] = {
    400: InvalidRequestError,
    401: TokenInvalidError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: SessionAlreadyExistsError,
    413: InvalidRequestError,
    415: InvalidRequestError,
    422: InvalidRequestError,
    500: InternalError,
    502: StreamError,
    503: ServiceUnavailableError,
    504: AgentTimeoutError,
}


def problem_of(body: bytes) -> ProblemDetails | None:
    """The ProblemDetails in an error body, or None when it is not one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("type"), str) and isinstance(value.get("status"), int):
        return value  # type: ignore[return-value]
    return None


def error_for(response: httpx.Response) -> SandboxAgentError:
    """The typed error for an error response whose body has been read."""
    problem = problem_of(response.content)
    cls: type[SandboxAgentError] | None = None
    # The storage-unavailable 503 carries the legacy `stream_error` type: the status says more.
    if response.status_code == 503:
        cls = ServiceUnavailableError
    elif problem is not None and problem["type"].startswith(TYPE_PREFIX):
        cls = BY_TYPE.get(problem["type"][len(TYPE_PREFIX) :])
    if cls is None:
        cls = BY_STATUS.get(response.status_code)
    if cls is None:
        cls = ServerError if response.status_code >= 500 else SandboxAgentError
    return cls(response.status_code, problem, response)
