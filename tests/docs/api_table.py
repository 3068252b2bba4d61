"""The API page's endpoint table, made from the served OpenAPI document: each operation with its
success and legacy error statuses, and the statuses and parameters the bridge adds (marked
``x-acp-rest-bridge-addition`` there). ``python -m tests.docs.api_table`` prints it to paste into
docs/api.md; tests/docs/test_docs.py keeps the two equal."""

from __future__ import annotations

import json
from typing import Any

from tests.support import ROOT

DOCUMENT = ROOT / "openapi" / "openapi.json"
START = "<!-- endpoints: `python -m tests.docs.api_table` prints this table; a test keeps them equal -->\n"
END = "<!-- /endpoints -->"
ADDITION = "x-acp-rest-bridge-addition"


def render(document: dict[str, Any] | None = None) -> str:
    if document is None:
        document = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    head = "| method | path | what | success | errors in the legacy document | errors the bridge documents besides |"
    rows = [head, "|---|---|---|---|---|---|"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method not in ("get", "put", "post", "delete", "patch"):
                continue
            codes = operation["responses"]
            success = [c for c in codes if c.startswith("2")]
            legacy = [c for c in codes if not c.startswith("2") and not codes[c].get(ADDITION)]
            added = [c for c in codes if codes[c].get(ADDITION)]
            extra = [p["name"] for p in operation.get("parameters", []) if p.get(ADDITION)]
            what = operation.get("summary", "") + "".join(f" (adds `{name}`)" for name in extra)
            rows.append(
                f"| {method.upper()} | `{path}` | {what} | {', '.join(success)} | "
                f"{', '.join(legacy) or '—'} | {', '.join(added) or '—'} |"
            )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
