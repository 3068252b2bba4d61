"""Writes src/acp_rest_bridge_client/client.py, the synchronous client, from async_client.py: the one
body both clients share is written once, for asyncio, and turned into its blocking twin (as psycopg
makes its sync code). ``--check`` only compares (a test runs it).

    .venv/bin/python clients/python/generate_sync.py [--check]

The source is transformed as a concrete syntax tree (libcst), so comments and layout stay: ``async``
and ``await`` go, ``asyncio.to_thread(f, ...)`` becomes ``f(...)``, the names in NAMES become their
blocking twins (in code, docstrings and comments alike), and the docstrings' wording in PHRASES
changes. Then ruff drops the imports left unused and formats the file as the project does.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PACKAGE = HERE / "src" / "acp_rest_bridge_client"
SOURCE = PACKAGE / "async_client.py"
TARGET = PACKAGE / "client.py"

DOCSTRING = '''"""``SandboxAgent``: the client.

Generated from ``async_client.py`` by ``clients/python/generate_sync.py``: do not edit.
"""'''

# Each async name and its blocking twin.
NAMES = {
    "AsyncSandboxAgent": "SandboxAgent",
    "AsyncEventStream": "EventStream",
    "AsyncEvents": "Events",
    "AsyncIterator": "Iterator",
    "AsyncClient": "Client",
    "AbstractAsyncContextManager": "AbstractContextManager",
    "asynccontextmanager": "contextmanager",
    "aclosing": "closing",
    "aclose": "close",
    "aread": "read",
    "aiter_text": "iter_text",
    "async_sleep": "sleep",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
}
# Wording of docstrings and comments that only fits the async client.
PHRASES = {
    ", for asyncio": "",
    "``await ": "``",
    "``async with``": "``with``",
    "another task or thread": "another thread",
    "any task or thread": "any thread",
}
NAME_PATTERN = re.compile(r"\b(" + "|".join(map(re.escape, NAMES)) + r")\b")


def words(text: str) -> str:
    for phrase, plain in PHRASES.items():
        text = text.replace(phrase, plain)
    return NAME_PATTERN.sub(lambda match: NAMES[match.group(1)], text)


class Unasync(cst.CSTTransformer):
    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        return updated.with_changes(asynchronous=None)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        return updated.with_changes(asynchronous=None)

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.With:
        return updated.with_changes(asynchronous=None)

    def leave_Await(self, original: cst.Await, updated: cst.Await) -> cst.BaseExpression:
        return updated.expression.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and (func.value.value, func.attr.value) == ("asyncio", "to_thread")
        ):
            # asyncio.to_thread(f, *args, **kwargs) -> f(*args, **kwargs)
            target, *args = updated.args
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return cst.Call(func=target.value, args=args)
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=NAMES.get(updated.value, updated.value))

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        return updated.with_changes(value=words(updated.value))

    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.Comment:
        return updated.with_changes(value=words(updated.value))


def module_docstring(module: cst.Module) -> cst.Module:
    first = module.body[0]
    assert isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr)
    doc = first.with_changes(body=[cst.Expr(cst.SimpleString(DOCSTRING))])
    return module.with_changes(body=[doc, *module.body[1:]])


def generate() -> str:
    module = cst.parse_module(SOURCE.read_text())
    text = module_docstring(module.visit(Unasync())).code
    # The imports the blocking code no longer uses (asyncio, ...) go, the rest is sorted and formatted
    # with the project's own settings, as the file is checked with them.
    for command in (["check", "--fix-only", "--select", "F401,I", "--exit-zero"], ["format"]):
        done = subprocess.run(
            [str(Path(sys.executable).with_name("ruff")), *command, "--stdin-filename", str(TARGET), "-"],
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
    parser.add_argument("--check", action="store_true", help="exit 1 when client.py differs from async_client.py")
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
