"""The served OpenAPI document: the legacy contract (OpenAPI 3.0), generated from the app's own models.

Routes declare their documentation with the helpers below (``problems``, ``json_request``,
``query``...), which are plain data; the document itself is built on the first request for it
(FastAPI caches it), never at import or start-up. ``legacy_openapi`` turns FastAPI's 3.1 output into
the legacy 3.0 shapes: components are exactly ``app.legacy.models.LEGACY_SCHEMAS``, nullable unions
become ``nullable: true``, FastAPI's own 422 ``HTTPValidationError`` entries go (the server answers
bad input with ProblemDetails, behavior §1.3). What the bridge adds to the legacy contract carries
the ``x-acp-rest-bridge-addition`` extension.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from pydantic import create_model

from app.legacy.models import LEGACY_SCHEMAS, ProblemDetails

OPENAPI_VERSION = "3.0.3"
REF = "#/components/schemas/"
ADDITION = "x-acp-rest-bridge-addition"
MEDIA_TYPES = "x-acp-rest-bridge-media-types"
_QUERY = "x-acp-rest-bridge-query"

TAGS = [
    {"name": "meta", "description": "The server itself"},
    {"name": "agents", "description": "Agents: list, install, modes, models"},
    {"name": "sessions", "description": "Sessions, messages, events, permissions and questions"},
    {"name": "fs", "description": "Files and directories"},
]


# ---- declarations used by the routers -----------------------------------------------------------
def problems(**descriptions: str) -> dict[int | str, dict[str, Any]]:
    """Error responses with a ProblemDetails body: ``problems(e404="Session not found")``."""
    return {int(code[1:]): {"model": ProblemDetails, "description": text} for code, text in descriptions.items()}


def json_request(schema: str) -> dict[str, Any]:
    """A required JSON request body of the named legacy schema (the handler parses it itself)."""
    return {"required": True, "content": {"application/json": {"schema": {"$ref": REF + schema}}}}


BINARY = {"type": "string", "format": "binary"}


def binary_request(*media_types: str, additions: tuple[str, ...] = ()) -> dict[str, Any]:
    """A required binary body. Media types the bridge accepts beyond legacy's are listed in the
    ``x-acp-rest-bridge-media-types`` extension, not as ``content`` entries: client generators
    warn on (and drop) a body media type they do not know."""
    content: dict[str, Any] = {media: {"schema": BINARY} for media in media_types}
    body: dict[str, Any] = {"required": True, "content": content}
    if additions:
        body[MEDIA_TYPES] = list(additions)
    return body


def query(schema: str, *, exclude: tuple[str, ...] = (), **descriptions: str) -> dict[str, Any]:
    """Query parameters from the properties of a legacy ``*Query`` schema, expanded when the
    document is built; ``descriptions`` by parameter name."""
    return {_QUERY: {"schema": schema, "exclude": list(exclude), "descriptions": descriptions}}


def operation(
    *, parameters: list[dict[str, Any]] | None = None, body: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """``openapi_extra`` of a route: parameters, request body, query marker, extensions."""
    result: dict[str, Any] = dict(extra)
    if parameters:
        result["parameters"] = parameters
    if body is not None:
        result["requestBody"] = body
    return result


# ---- what the server answers beyond the legacy document --------------------------------------
# The legacy document declares few error statuses (none for 401, 413, 5xx); the server answers
# these as well (behavior §1-§3), always with a ProblemDetails body. They are added to each
# operation, marked as additions, so that typed clients know every status they can get.
JSON_BODY_PROBLEMS = {
    400: "Unparsable JSON body, or an invalid query",
    413: "The body is larger than the body limit",
    415: "The body is not `application/json`",
    422: "The JSON body does not match its schema",
}
# Listing modes or models may start the agent once to ask it.
AGENT_START_PROBLEMS = {
    502: "The agent answered with an error",
    504: "The agent did not answer in time",
}
SESSION_TURN_PROBLEMS = {
    400: "Invalid request (the session has ended, a bad mode or attachment)",
    429: "Too many live sessions to start this one's agent again",
    404: "No such session, or its agent is not installed",
    500: "The agent process exited",
    502: "The agent answered with an error",
    504: "The agent did not answer in time",
}
FS_PROBLEMS = {
    400: "Invalid path or request",
    403: "The path is outside the allowed filesystem roots",
    404: "No such session",
    502: "The filesystem operation failed",
}
ROUTE_PROBLEMS: dict[tuple[str, str], dict[int, str]] = {
    ("post", "/v1/agents/{agent}/install"): {
        400: "Invalid request",
        404: "No such agent",
        504: "The install timed out",
    },
    ("get", "/v1/agents/{agent}/modes"): {404: "The agent is not installed", **AGENT_START_PROBLEMS},
    ("get", "/v1/agents/{agent}/models"): {400: "Unsupported agent", **AGENT_START_PROBLEMS},
    ("post", "/v1/sessions/{session_id}"): {
        404: "The agent is not installed",
        429: "Too many live sessions (`ACP_BRIDGE_MAX_SESSIONS`)",
        500: "The agent process exited or its install failed",
        502: "The agent answered with an error",
        504: "The agent did not start in time",
    },
    ("post", "/v1/sessions/{session_id}/messages"): SESSION_TURN_PROBLEMS,
    ("post", "/v1/sessions/{session_id}/messages/stream"): SESSION_TURN_PROBLEMS,
    ("get", "/v1/sessions/{session_id}/events"): {400: "Invalid query"},
    ("get", "/v1/sessions/{session_id}/events/sse"): {400: "Invalid query", 404: "No such session"},
    ("post", "/v1/sessions/{session_id}/permissions/{permission_id}/reply"): {400: "Unknown permission or reply"},
    ("post", "/v1/sessions/{session_id}/questions/{question_id}/reply"): {400: "Unknown question or answers"},
    ("post", "/v1/sessions/{session_id}/questions/{question_id}/reject"): {400: "Unknown question"},
}


def added_problems(method: str, path: str, op: dict[str, Any]) -> dict[int, str]:
    """The statuses the server can answer on one operation beyond those the legacy document lists."""
    found: dict[int, str] = {}
    if path.startswith("/v1/fs/"):
        found.update(FS_PROBLEMS)
    if any(p.get("in") == "query" for p in op.get("parameters", [])):
        found[400] = found.get(400, "Invalid query")
    body = op.get("requestBody", {}).get("content", {})
    if "application/json" in body:
        found.update({k: v for k, v in JSON_BODY_PROBLEMS.items() if k not in found})
    elif body:
        found[413] = "The body is larger than the limit"
    found.update({k: v for k, v in ROUTE_PROBLEMS.get((method, path), {}).items() if k not in found})
    if path != "/v1/health":
        found[401] = "A token is required and was missing or wrong"
    found.setdefault(403, "Without a token: a Host that is not served, or a cross-site request that changes state")
    found[500] = found.get(500, "An unexpected server error (`internal_error`)")
    found[503] = "The server is out of a resource it needs (storage, file descriptors) or not ready yet"
    return found


def _problem_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF + "ProblemDetails"}}},
        ADDITION: True,
    }


# ---- building the document -------------------------------------------------------------------
def legacy_schemas() -> dict[str, Any]:
    """``components.schemas``: every legacy schema from its model, in OpenAPI 3.0 form."""
    fields: dict[str, Any] = {name: (value, ...) for name, value in LEGACY_SCHEMAS.items()}
    holder = create_model("LegacySchemas", **fields)
    defs: dict[str, Any] = holder.model_json_schema(ref_template=REF + "{model}").get("$defs", {})
    private = {name: schema for name, schema in defs.items() if name not in LEGACY_SCHEMAS}
    return {name: to_openapi30(defs[name], private) for name in LEGACY_SCHEMAS}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return {"allOf": [schema], "nullable": True}
    return {**schema, "nullable": True}


def to_openapi30(schema: Any, inline: dict[str, Any] | None = None) -> Any:
    """A pydantic (JSON Schema 2020-12 / OpenAPI 3.1) schema in OpenAPI 3.0 form, as legacy wrote it:
    ``anyOf [X, null]`` -> X with ``nullable``, ``const`` -> ``enum``, other ``anyOf`` -> ``oneOf``,
    no ``title``/``default``, ``$ref``s to the ``inline`` schemas replaced by their bodies."""
    inline = inline or {}
    if isinstance(schema, list):
        return [to_openapi30(item, inline) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(REF) and ref[len(REF) :] in inline:
        return to_openapi30(inline[ref[len(REF) :]], inline)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "default"):
            continue
        if key == "properties":
            out[key] = {name: to_openapi30(sub, inline) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = {} if value is True else to_openapi30(value, inline)
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if "anyOf" in out:
        variants = out.pop("anyOf")
        others = [v for v in variants if v != {"type": "null"}]
        if len(others) < len(variants):
            if len(others) == 1:
                return {**out, **_nullable(others[0])}
            return {**out, "oneOf": others, "nullable": True}
        out["oneOf"] = others
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _query_parameters(marker: dict[str, Any], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = schemas[marker["schema"]]
    required = set(schema.get("required", []))
    params = []
    for prop, prop_schema in schema["properties"].items():
        if prop in marker["exclude"]:
            continue
        name = _snake(prop)
        param: dict[str, Any] = {"name": name, "in": "query"}
        if name in marker["descriptions"]:
            param["description"] = marker["descriptions"][name]
        param["required"] = prop in required
        param["schema"] = prop_schema
        params.append(param)
    return params


def _operation(op: dict[str, Any], schemas: dict[str, Any]) -> None:
    marker = op.pop(_QUERY, None)
    params = op.get("parameters", [])
    if marker is not None:
        params = [*params, *_query_parameters(marker, schemas)]
    for param in params:
        param["schema"] = to_openapi30(param.get("schema", {}))
        if param["schema"].get("description") == param.get("description"):
            param["schema"].pop("description", None)  # FastAPI repeats it there
    if params:
        op["parameters"] = params
    for part in (op.get("requestBody", {}), *op.get("responses", {}).values()):
        for media in part.get("content", {}).values():
            if "schema" in media:
                media["schema"] = to_openapi30(media["schema"])
    responses = op.get("responses", {})
    # FastAPI documents a 422 HTTPValidationError for every route with parameters; this server
    # answers bad input with the legacy ProblemDetails instead.
    if "HTTPValidationError" in str(responses.get("422", "")):
        del responses["422"]
    # A JSON body FastAPI assumed for routes that answer with their own response classes.
    for code, response in responses.items():
        content = response.get("content", {})
        if content.get("application/json", {}).get("schema") == {}:
            del content["application/json"]
        if not content or code == "204":
            response.pop("content", None)


def legacy_openapi(app: FastAPI) -> dict[str, Any]:
    from fastapi.openapi.utils import get_openapi  # only when the document is asked for

    doc = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=OPENAPI_VERSION,
        description=app.description,
        routes=app.routes,
        tags=TAGS,
        servers=[{"url": "http://localhost:2468"}],
        separate_input_output_schemas=False,
    )
    schemas = legacy_schemas()
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            _operation(op, schemas)
            responses = op.setdefault("responses", {})
            for status, description in sorted(added_problems(method, path, op).items()):
                if str(status) not in responses:
                    responses[str(status)] = _problem_response(description)
    doc["components"] = {**doc.get("components", {}), "schemas": schemas}
    return doc


def install(app: FastAPI) -> None:
    """Serve the legacy document at /openapi.json; built on first use, then cached, and its JSON
    rendered once: every answer shares one body (a client pipelining requests for it and never
    reading costs no copy of it per answer)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = legacy_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    rendered: list[bytes] = []

    async def openapi_json(request: Request) -> Response:
        if not rendered:
            rendered.append(bytes(JSONResponse(openapi()).body))
        return Response(rendered[0], media_type="application/json")

    app.add_route("/openapi.json", openapi_json, methods=["GET"], include_in_schema=False)
