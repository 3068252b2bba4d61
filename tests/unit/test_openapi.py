"""The checked-in OpenAPI document is the one the server serves, and it covers the legacy contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.main import create_app
from app.settings import Settings
from tests.support import ROOT, SHARED

DOC = ROOT / "openapi" / "openapi.json"


def served(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return create_app(Settings(data_dir=tmp_path)).openapi()


def test_checked_in_document_is_current(tmp_path: Path) -> None:
    assert json.loads(DOC.read_text()) == served(tmp_path), (
        "openapi/openapi.json is stale: run `acp-rest-bridge openapi --out openapi/openapi.json`"
    )


def test_every_legacy_operation_is_served(tmp_path: Path) -> None:
    legacy_doc = SHARED / "legacy" / "openapi.json"
    if not legacy_doc.exists():
        pytest.skip("../shared is not present")
    legacy = json.loads(legacy_doc.read_text())
    ours = served(tmp_path)["paths"]
    missing = []
    for path, operations in legacy["paths"].items():
        for method, op in operations.items():
            if method not in ours.get(path, {}):
                missing.append(f"{method.upper()} {path}")
            else:
                assert ours[path][method].get("operationId") == op["operationId"], path
    assert not missing, missing
