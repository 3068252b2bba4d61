"""Writes REFERENCE.md, the client's method reference, from its signatures and docstrings.
``--check`` only compares.

    .venv/bin/python clients/python/generate_reference.py [--check]
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "src"))

import acp_rest_bridge_client as client  # noqa: E402  (from this checkout, not an installed copy)
from acp_rest_bridge_client import errors  # noqa: E402

TARGET = HERE / "REFERENCE.md"


def signature(obj: object, name: str) -> str:
    text = str(inspect.signature(obj, eval_str=True))  # type: ignore[arg-type]
    for prefix in (
        "acp_rest_bridge_client.models.",
        "acp_rest_bridge_client.client.",
        "acp_rest_bridge_client.streams.",
        "collections.abc.",
        "typing.",
    ):
        text = text.replace(prefix, "")
    text = text.replace("httpx._models.", "httpx.").replace("(self, ", "(").replace("(self)", "()")
    return f"{name}{text}"


def doc(obj: object) -> str:
    text = inspect.getdoc(obj) or ""
    return " ".join(text.split())


def methods(cls: type) -> list[str]:
    lines = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or not callable(member) or name == "dispose":
            continue
        lines.append(f"- `{signature(member, name)}`" + (f": {doc(member)}" if doc(member) else ""))
    return lines


def reference() -> str:
    out = [
        "# acp-rest-bridge-client reference",
        "",
        "Generated from the signatures and docstrings by `clients/python/generate_reference.py`: do not edit.",
        "Types named here are the `TypedDict`s and aliases of `acp_rest_bridge_client.models`.",
        "",
        "## SandboxAgent",
        "",
        doc(client.SandboxAgent),
        "",
        *methods(client.SandboxAgent),
        "",
        "## AsyncSandboxAgent",
        "",
        doc(client.AsyncSandboxAgent) + " Every method above, as a coroutine; the streams are async iterators.",
        "",
        "## Errors",
        "",
        doc(errors),
        "",
    ]
    for name in client.__all__:
        obj = getattr(client, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            out.append(f"- `{name}`: {doc(obj)}")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when REFERENCE.md is out of date")
    text = reference()
    if parser.parse_args().check:
        if TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run clients/python/generate_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
