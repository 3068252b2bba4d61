"""The legacy -> ACP mapping table (mappings/legacy_to_acp.csv) covers the whole legacy contract,
and every row the bridge implements names a test that exists.

Rows of feature areas still being built elsewhere are ``pending``: their tests are reported (skipped)
until they exist, never failed.
"""

from __future__ import annotations

import ast
import csv
import json
import warnings
from typing import Any

import pytest

from tests.support import ROOT, SHARED, SHARED_MISSING

TABLE = ROOT / "mappings" / "legacy_to_acp.csv"
COLUMNS = ["legacy", "acp", "how", "status", "test", "notes"]
HOWS = {"acp", "meta", "bridge", "not-applicable"}
STATUSES = {"implemented", "pending", "not-applicable"}
# Feature areas built in parallel; their rows may name tests that do not exist yet.
PARALLEL_TEST_FILES = {
    "tests/e2e/test_permissions.py",
    "tests/e2e/test_questions.py",
    "tests/e2e/test_fs_api.py",
    "tests/e2e/test_streaming.py",
}


def rows() -> list[dict[str, str]]:
    with TABLE.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def collected_tests() -> set[str]:
    """``path::function`` of every test function in tests/ (read from the source, nothing imported)."""
    found: set[str] = set()
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relative = path.relative_to(ROOT).as_posix()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                found.add(f"{relative}::{node.name}")
    return found


def legacy_keys(doc: dict[str, Any]) -> list[str]:
    """Every path, then every schema and property, named as the mapping table names them:
    ``Schema.prop``, ``.allOf[i]``/``.oneOf[i]``, ``[]`` for array items, ``.*`` for map values,
    ``.$ref(Name)`` where a property refers to another schema."""
    keys: list[str] = list(doc["paths"])

    def walk(prefix: str, schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            keys.append(f"{prefix}.$ref({schema['$ref'].rsplit('/', 1)[1]})")
            return
        for combinator in ("allOf", "oneOf", "anyOf"):
            for index, sub in enumerate(schema.get(combinator, [])):
                keys.append(f"{prefix}.{combinator}[{index}]")
                walk(keys[-1], sub)
        for name, sub in (schema.get("properties") or {}).items():
            keys.append(f"{prefix}.{name}")
            walk(keys[-1], sub)
        if "items" in schema:
            keys.append(f"{prefix}[]")
            walk(keys[-1], schema["items"])
        if isinstance(schema.get("additionalProperties"), dict):
            keys.append(f"{prefix}.*")
            walk(keys[-1], schema["additionalProperties"])

    for name, schema in doc["components"]["schemas"].items():
        keys.append(name)
        walk(name, schema)
    return keys


def test_every_legacy_path_and_schema_property_has_a_row() -> None:
    contract = SHARED / "legacy" / "openapi.json"
    if not contract.exists():
        pytest.skip(SHARED_MISSING)
    expected = legacy_keys(json.loads(contract.read_text(encoding="utf-8")))
    table = [row["legacy"] for row in rows()]
    assert len(table) == len(set(table)), "duplicate rows"
    assert sorted(set(expected) - set(table)) == [], "legacy keys without a row"
    assert sorted(set(table) - set(expected)) == [], "rows for keys the legacy contract does not have"


def test_every_row_is_explained() -> None:
    for row in rows():
        key = row["legacy"]
        assert row["how"] in HOWS, key
        assert row["status"] in STATUSES, key
        assert row["acp"].strip() and row["notes"].strip(), f"{key}: say what ACP has and how the bridge does it"
        if row["how"] == "not-applicable":
            assert row["status"] == "not-applicable" and not row["test"], key
        else:
            assert row["status"] in ("implemented", "pending") and "::" in row["test"], key


def test_implemented_rows_name_existing_tests() -> None:
    tests = collected_tests()
    missing = [
        (row["legacy"], row["test"]) for row in rows() if row["status"] == "implemented" and row["test"] not in tests
    ]
    assert missing == []


def test_pending_rows_belong_to_parallel_feature_areas() -> None:
    tests = collected_tests()
    pending = [row for row in rows() if row["status"] == "pending"]
    strays = [row["legacy"] for row in pending if row["test"].split("::")[0] not in PARALLEL_TEST_FILES]
    assert strays == [], "only rows of parallel feature areas may wait for their tests"
    ready = sorted({row["test"] for row in pending if row["test"] in tests})
    if ready:
        warnings.warn(f"tests now exist, mark their rows implemented: {ready}", stacklevel=1)
    waiting = sorted({row["test"] for row in pending if row["test"] not in tests})
    if waiting:
        pytest.skip(
            f"{sum(r['test'] in waiting for r in pending)} pending rows wait for: {', '.join(waiting)} "
            "(this check runs once those tests exist)"
        )
