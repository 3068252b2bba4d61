"""The served OpenAPI document is the legacy contract, and the checked-in copy is the served one.

The comparison goes structure by structure (paths, operations, parameters, bodies, responses,
component schemas) and lists every difference; prose (summaries, descriptions) is the bridge's own
and is not compared. What the bridge adds carries ``x-acp-rest-bridge-addition`` and is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.api.openapi import ADDITION, MEDIA_TYPES
from app.main import cli, create_app
from app.settings import Settings
from tests.support import ROOT, SHARED, SHARED_MISSING

DOC = ROOT / "openapi" / "openapi.json"
LEGACY = SHARED / "legacy" / "openapi.json"
PROSE = {"description", "summary"}


def served(tmp_path: Path) -> dict[str, Any]:
    return create_app(Settings(data_dir=tmp_path)).openapi()


def legacy() -> dict[str, Any]:
    if not LEGACY.exists():
        pytest.skip(SHARED_MISSING)
    contract: dict[str, Any] = json.loads(LEGACY.read_text())
    return contract


def _schema(node: Any) -> Any:
    """A schema without prose; `required` and `oneOf` as sets."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key == "required" and isinstance(value, list):
            out[key] = sorted(value)
        elif key == "oneOf":  # unordered in meaning
            out[key] = sorted((_schema(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
        elif key not in PROSE:
            out[key] = _schema(value)
    return out


def _compare(ours: Any, theirs: Any, where: str, diffs: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours:
                diffs.append(f"{where}/{key}: missing (legacy: {json.dumps(theirs[key])})")
            elif key not in theirs:
                diffs.append(f"{where}/{key}: extra ({json.dumps(ours[key])})")
            else:
                _compare(ours[key], theirs[key], f"{where}/{key}", diffs)
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _compare(a, b, f"{where}[{index}]", diffs)
    elif ours != theirs:
        diffs.append(f"{where}: {json.dumps(ours)} (legacy: {json.dumps(theirs)})")


def _parameters(op: dict[str, Any]) -> dict[str, Any]:
    return {
        f"{p['in']}:{p['name']}": {"required": p.get("required", False), "schema": _schema(p.get("schema"))}
        for p in op.get("parameters", [])
        if not p.get(ADDITION)
    }


def _content(part: dict[str, Any]) -> dict[str, Any]:
    return {
        media: _schema(body.get("schema")) for media, body in part.get("content", {}).items() if not body.get(ADDITION)
    }


def _operation(op: dict[str, Any]) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "operationId": op.get("operationId"),
        "tags": sorted(op.get("tags", [])),
        "parameters": _parameters(op),
        "responses": {
            code: _content(response) for code, response in op.get("responses", {}).items() if not response.get(ADDITION)
        },
    }
    if "requestBody" in op:
        shape["requestBody"] = {"required": op["requestBody"].get("required", False), **_content(op["requestBody"])}
    return shape


def structural_diff(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    if not str(ours.get("openapi", "")).startswith("3.0."):
        diffs.append(f"openapi: {ours.get('openapi')} (legacy: {theirs['openapi']})")
    for path in sorted(set(ours["paths"]) | set(theirs["paths"])):
        mine, legacy_ops = ours["paths"].get(path, {}), theirs["paths"].get(path, {})
        for method in sorted(set(mine) | set(legacy_ops)):
            where = f"paths/{path}/{method}"
            if method not in legacy_ops:
                diffs.append(f"{where}: extra operation")
            elif method not in mine:
                diffs.append(f"{where}: missing operation")
            else:
                _compare(_operation(mine[method]), _operation(legacy_ops[method]), where, diffs)
    _compare(
        _schema(ours.get("components", {}).get("schemas", {})),
        _schema(theirs["components"]["schemas"]),
        "components/schemas",
        diffs,
    )
    return diffs


def test_served_document_is_the_legacy_contract(tmp_path: Path) -> None:
    diffs = structural_diff(served(tmp_path), legacy())
    assert not diffs, "\n".join(diffs)


def test_additions_are_marked_and_documented(tmp_path: Path) -> None:
    doc = served(tmp_path)
    upload = doc["paths"]["/v1/fs/upload-batch"]["post"]["requestBody"]["content"]
    body = doc["paths"]["/v1/fs/upload-batch"]["post"]["requestBody"]
    assert set(upload) == {"application/octet-stream"}
    assert body[MEDIA_TYPES] == ["application/x-tar"]
    sse = doc["paths"]["/v1/sessions/{session_id}/events/sse"]["get"]
    assert [p["name"] for p in sse["parameters"] if p.get(ADDITION)] == ["Last-Event-ID"]


def test_every_status_the_server_answers_is_declared(tmp_path: Path) -> None:
    """401 on every route but health, 400/413/415/422 where a JSON body is parsed, 500 and 503
    everywhere; each added response is a ProblemDetails marked as an addition."""
    doc = served(tmp_path)
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            responses = op["responses"]
            assert ("401" in responses) == (path != "/v1/health"), (method, path)
            assert {"403", "500", "503"} <= set(responses), (method, path)
            if "application/json" in op.get("requestBody", {}).get("content", {}):
                assert {"400", "413", "415", "422"} <= set(responses), (method, path)
            for code, response in responses.items():
                if response.get(ADDITION):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ProblemDetails"}, (method, path, code)
    messages = doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]
    assert {"400", "404", "429", "500", "502", "504"} <= set(messages)


def test_no_fastapi_validation_schemas(tmp_path: Path) -> None:
    text = json.dumps(served(tmp_path))
    assert "HTTPValidationError" not in text and "ValidationError" not in text
    assert '"anyOf"' not in text and '"const"' not in text


def test_every_ref_resolves(tmp_path: Path) -> None:
    doc = served(tmp_path)
    schemas = doc["components"]["schemas"]
    refs = {ref.split("/")[-1] for ref in _refs(doc)}
    assert refs <= set(schemas), refs - set(schemas)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


def test_the_diff_lists_differences(tmp_path: Path) -> None:
    """The comparison is not vacuous: a changed document shows each change."""
    theirs = legacy()
    ours = json.loads(json.dumps(theirs))
    del ours["components"]["schemas"]["SessionInfo"]["properties"]["title"]
    ours["paths"]["/v1/sessions/{session_id}/events"]["get"]["parameters"][1]["required"] = True
    ours["openapi"] = "3.1.0"
    diffs = structural_diff(ours, theirs)
    assert len(diffs) == 3, diffs


def test_checked_in_document_is_current(tmp_path: Path) -> None:
    assert json.loads(DOC.read_text()) == served(tmp_path), (
        "openapi/openapi.json is stale: run `acp-rest-bridge openapi --out openapi/openapi.json`"
    )


def test_openapi_command_writes_the_served_document(tmp_path: Path) -> None:
    out = tmp_path / "openapi.json"
    cli(["openapi", "--out", str(out)])
    assert json.loads(out.read_text()) == served(tmp_path)


def test_document_is_built_lazily(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path))
    assert app.openapi_schema is None
    first = app.openapi()
    assert app.openapi() is first
