"""The one place where errors become HTTP answers: legacy ProblemDetails, `application/json`."""

from __future__ import annotations

import errno
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, PlainTextResponse, Response

from app.errors import BridgeError, InternalError, RequestFormatError, ServiceUnavailable

log = logging.getLogger("acp_rest_bridge.api")

# Out of descriptors: the request may succeed later, so 503 rather than a server fault.
RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN}

SERVER_INFO = (
    "acp-rest-bridge: the sandbox-agent v0.1 REST API over ACP agents.\n"
    "API under /v1 (GET /v1/health, /v1/agents, /v1/sessions); OpenAPI document at /openapi.json.\n"
)


def problem_response(error: BridgeError) -> JSONResponse:
    return JSONResponse(error.problem(), status_code=error.status)


async def _bridge_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BridgeError)
    return problem_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return PlainTextResponse("404 Not Found\n\n" + SERVER_INFO, status_code=404)
    if exc.status_code == 405:
        return Response(status_code=405, headers=exc.headers)
    error = RequestFormatError(str(exc.detail), exc.status_code)
    return JSONResponse(error.problem(), status_code=exc.status_code, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return problem_response(RequestFormatError(f"Failed to deserialize request: {exc.errors()}", 422))


def unexpected_problem(exc: BaseException) -> BridgeError:
    if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
        return ServiceUnavailable(f"{exc.strerror or exc} (os error {exc.errno})")
    return InternalError(type(exc).__name__)


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    """Last resort for an exception no handler expected: logged with its traceback, answered as
    ProblemDetails with the request's method and path, never the framework's plain text."""
    log.error("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(unexpected_problem(exc))


def install(app: FastAPI) -> None:
    app.add_exception_handler(BridgeError, _bridge_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)
