"""Writes src/acp_rest_bridge_client/models.py from the served OpenAPI document (openapi/openapi.json),
with datamodel-code-generator: the contract's schemas as TypedDicts. ``--check`` only compares.

    .venv/bin/python clients/python/generate_models.py [--check]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCUMENT = ROOT / "openapi" / "openapi.json"
TARGET = HERE / "src" / "acp_rest_bridge_client" / "models.py"
HEADER = (
    '"""The API\'s schemas as TypedDicts, generated from openapi/openapi.json: do not edit.\n\n'
    'Remake: .venv/bin/python clients/python/generate_models.py\n"""\n'
)


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def generate() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "models.py"
        subprocess.run(
            [
                tool("datamodel-codegen"),
                "--input",
                str(DOCUMENT),
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
