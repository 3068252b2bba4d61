"""The one exception hierarchy of the bridge.

Each error knows its legacy ErrorType, title, HTTP status, display string and extension members;
``app.api.problems`` turns any of them into the legacy ProblemDetails body.
"""

from __future__ import annotations

from typing import Any


class BridgeError(Exception):
    """Base of every error the HTTP layer answers as ProblemDetails."""

    error_type = "invalid_request"
    title = "Invalid Request"
    status = 400

    def __init__(
        self,
        detail: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.agent = agent
        self.session_id = session_id
        self.details = details

    def problem(self) -> dict[str, Any]:
        """The ProblemDetails body, keys in the legacy order, extensions only when they apply."""
        body: dict[str, Any] = {
            "type": f"urn:sandbox-agent:error:{self.error_type}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if self.agent is not None:
            body["agent"] = self.agent
        if self.session_id is not None:
            body["sessionId"] = self.session_id
        if self.details is not None:
            body["details"] = self.details
        return body


class InvalidRequest(BridgeError):
    def __init__(self, message: str, **kw: Any) -> None:
        super().__init__(f"invalid request: {message}", **kw)
        self.message = message


class RequestFormatError(InvalidRequest):
    """Body or query that could not be parsed (legacy: framework-level 400/413/415/422)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class UnsupportedAgent(BridgeError):
    error_type, title, status = "unsupported_agent", "Unsupported Agent", 400

    def __init__(self, agent: str) -> None:
        super().__init__(f"unsupported agent: {agent}", agent=agent)


class AgentNotInstalled(BridgeError):
    error_type, title, status = "agent_not_installed", "Agent Not Installed", 404

    def __init__(self, agent: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"agent not installed: {agent}", agent=agent, details=details)


# What npm (Node.js), pip and Python's ssl say when a certificate is not trusted: a TLS-intercepting
# proxy, whose CA each of them must be given (docs/docker.md, "Proxies and CA certificates").
UNTRUSTED_CERTIFICATE = (
    "SELF_SIGNED_CERT_IN_CHAIN",
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "DEPTH_ZERO_SELF_SIGNED_CERT",
    "CERTIFICATE_VERIFY_FAILED",
    "self-signed certificate in certificate chain",
    "unable to get local issuer certificate",
)
CA_HINT = (
    "A TLS certificate was not trusted: behind a TLS-intercepting proxy, give npm and Node.js agents its CA "
    "with NODE_EXTRA_CA_CERTS=<file>, pip PIP_CERT=<bundle> and uv and the bridge SSL_CERT_FILE=<bundle> "
    "(a bundle: the system's CAs and the proxy's), in the server's environment"
)


class InstallFailed(BridgeError):
    error_type, title, status = "install_failed", "Install Failed", 500

    def __init__(self, agent: str, stderr: str | None = None) -> None:
        if stderr is not None and any(marker in stderr for marker in UNTRUSTED_CERTIFICATE):
            stderr += "\n" + CA_HINT
        super().__init__(
            f"install failed: {agent}", agent=agent, details={"stderr": stderr} if stderr is not None else None
        )


class AgentProcessExited(BridgeError):
    error_type, title, status = "agent_process_exited", "Agent Process Exited", 500

    def __init__(
        self, agent: str, exit_code: int | None = None, stderr: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        details: dict[str, Any] = {}
        if exit_code is not None:
            details["exitCode"] = exit_code
        if stderr is not None:
            details["stderr"] = stderr
        details.update(extra or {})
        super().__init__(f"agent process exited: {agent}", agent=agent, details=details or None)


class TokenInvalid(BridgeError):
    error_type, title, status = "token_invalid", "Token Invalid", 401

    def __init__(self) -> None:
        super().__init__("token invalid", details={"message": "missing or invalid token"})


class PermissionDenied(BridgeError):
    error_type, title, status = "permission_denied", "Permission Denied", 403

    def __init__(self, message: str) -> None:
        super().__init__("permission denied", details={"message": message})


class SessionNotFound(BridgeError):
    error_type, title, status = "session_not_found", "Session Not Found", 404

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session not found: {session_id}", session_id=session_id)


class SessionAlreadyExists(BridgeError):
    error_type, title, status = "session_already_exists", "Session Already Exists", 409

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session already exists: {session_id}", session_id=session_id)


class ModeNotSupported(BridgeError):
    error_type, title, status = "mode_not_supported", "Mode Not Supported", 400

    def __init__(self, agent: str, mode: str) -> None:
        super().__init__(f"mode not supported: {agent} {mode}", agent=agent, details={"mode": mode})


class StreamError(BridgeError):
    error_type, title, status = "stream_error", "Stream Error", 502

    def __init__(self, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"stream error: {message}", details={"message": message, **(extra or {})})


class StorageUnavailable(BridgeError):
    """The data dir cannot take events now (disk full, I/O error, read-only). The legacy schema has
    no type for it; 503 says "try again later", ``details.code`` names it, the detail the cause."""

    error_type, title, status = "stream_error", "Storage Unavailable", 503

    def __init__(self, cause: str) -> None:
        super().__init__(f"storage unavailable: {cause}", details={"code": "storage_unavailable", "message": cause})


class Timeout(BridgeError):
    error_type, title, status = "timeout", "Timeout", 504

    def __init__(self, message: str | None = None, extra: dict[str, Any] | None = None) -> None:
        details = {**({"message": message} if message else {}), **(extra or {})}
        super().__init__("timeout", details=details or None)


class InternalError(BridgeError):
    """Anything the handlers did not expect: still a ProblemDetails body, never a plain-text 500."""

    error_type, title, status = "internal_error", "Internal Server Error", 500

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error: {message}", details={"message": message})


class ServiceUnavailable(BridgeError):
    """The server is out of a resource it needs right now (file descriptors): try again later."""

    error_type, title, status = "service_unavailable", "Service Unavailable", 503

    def __init__(self, message: str) -> None:
        super().__init__(f"service unavailable: {message}", details={"message": message})


class ForeignRequest(BridgeError):
    """A server without a token refuses a request from another site or for a foreign ``Host``:
    a web page (DNS rebinding, a cross-site form) must not drive it."""

    error_type, title, status = "permission_denied", "Permission Denied", 403

    def __init__(self, reason: str, remedy: str) -> None:
        super().__init__(f"permission denied: {reason}", details={"message": f"{reason}; {remedy}"})


class TooManySessions(BridgeError):
    """The server runs as many live sessions (each an agent process) as ``ACP_BRIDGE_MAX_SESSIONS``
    allows. The legacy schema has no type for it: 429 says "not now, end one", ``details.code`` names it."""

    error_type, title, status = "invalid_request", "Too Many Sessions", 429

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"too many sessions: {limit} are live, the most this server runs (ACP_BRIDGE_MAX_SESSIONS); "
            "terminate one and try again",
            details={"code": "too_many_sessions", "limit": limit},
        )
