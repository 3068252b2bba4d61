"""Writes src/acp_rest_bridge_client/models.py from the served OpenAPI document (openapi/openapi.json),
with datamodel-code-generator: the contract's schemas as TypedDicts. ``--check`` only compares.

One step of its own: the contract gives ``UniversalEvent`` one ``type`` (any of 13) and one ``data`` (any
of 9 shapes), and says which shape goes with which type only in prose. The document is read with
``UniversalEvent`` made a union of one schema per type (``ItemDeltaEvent``: ``type`` the literal
``item.delta``, ``data`` an ``ItemDeltaData``, the other properties as the contract has them), so that
a type checker narrows ``event["data"]`` once ``event["type"]`` is checked. The served document is
not changed.

    .venv/bin/python clients/python/generate_models.py [--check]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCUMENT = ROOT / "openapi" / "openapi.json"
TARGET = HERE / "src" / "acp_rest_bridge_client" / "models.py"
HEADER = (
    '"""The API\'s schemas as TypedDicts, generated from openapi/openapi.json: do not edit.\n\n'
    'Remake: .venv/bin/python clients/python/generate_models.py\n"""\n'
)


# Which data shape goes with each event type (legacy behaviour, 5.2); every type and every shape of
# the contract must appear here, else generation fails.
EVENT_DATA = {
    "session.started": "SessionStartedData",
    "session.ended": "SessionEndedData",
    "turn.started": "TurnEventData",
    "turn.ended": "TurnEventData",
    "item.started": "ItemEventData",
    "item.delta": "ItemDeltaData",
    "item.completed": "ItemEventData",
    "error": "ErrorData",
    "permission.requested": "PermissionEventData",
    "permission.resolved": "PermissionEventData",
    "question.requested": "QuestionEventData",
    "question.resolved": "QuestionEventData",
    "agent.unparsed": "AgentUnparsedData",
}
REF = "#/components/schemas/"


def event_name(event_type: str) -> str:
    """``item.delta`` -> ``ItemDeltaEvent``."""
    return "".join(word.capitalize() for word in re.split(r"[._]", event_type)) + "Event"


def with_event_union(document: dict[str, Any]) -> dict[str, Any]:
    """The document with ``UniversalEvent`` as a union discriminated by ``type``."""
    document = copy.deepcopy(document)
    schemas = document["components"]["schemas"]
    event = schemas["UniversalEvent"]
    types = schemas[event["properties"]["type"]["$ref"].removeprefix(REF)]["enum"]
    shapes = {variant["$ref"].removeprefix(REF) for variant in schemas["UniversalEventData"]["oneOf"]}
    if set(types) != set(EVENT_DATA) or shapes != set(EVENT_DATA.values()):
        raise SystemExit(f"EVENT_DATA is out of date: the contract has types {types} and data shapes {sorted(shapes)}")
    variants = {}
    for event_type in types:
        name = event_name(event_type)
        variant = copy.deepcopy(event)
        variant["description"] = f"An event of type `{event_type}`."
        variant["properties"]["type"] = {"type": "string", "enum": [event_type]}
        variant["properties"]["data"] = {"$ref": REF + EVENT_DATA[event_type]}
        schemas[name] = variant
        variants[event_type] = REF + name
    schemas["UniversalEvent"] = {
        "description": "An event: checking `type` tells which `data` it has.",
        "oneOf": [{"$ref": ref} for ref in variants.values()],
        "discriminator": {"propertyName": "type", "mapping": variants},
    }
    return document


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def generate() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "models.py"
        document = Path(tmp) / "openapi.json"
        document.write_text(json.dumps(with_event_union(json.loads(DOCUMENT.read_text()))))
        subprocess.run(
            [
                tool("datamodel-codegen"),
                "--input",
                str(document),
                "--input-file-type",
                "openapi",
                "--output",
                str(out),
                "--output-model-type",
                "typing.TypedDict",
                "--target-python-version",
                "3.11",
                "--use-standard-collections",
                "--use-union-operator",
                "--strict-nullable",
                "--use-tag-as-union-variant-name",
                "--use-schema-description",
                "--use-field-description",
                "--disable-timestamp",
                "--custom-file-header",
                HEADER,
                "--formatters",
                "ruff-format",
            ],
            check=True,
            timeout=120,
        )
        text = out.read_text()
    # Imports sorted and formatted with the project's own settings, as the file is checked with them.
    for command in (["check", "--fix-only", "--select", "I", "--exit-zero"], ["format"]):
        done = subprocess.run(
            [tool("ruff"), *command, "--stdin-filename", str(TARGET), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            timeout=60,
        )
        text = done.stdout
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when models.py differs from the document")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run {Path(__file__).relative_to(ROOT)}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
