"""``app/`` uses only public names of FastAPI, Starlette, uvicorn and the ACP SDK: no import of a
leading-underscore module or name of theirs, and no leading-underscore attribute that one of them
defines and ``app/`` does not (``router._mark_routes_changed()``, a private transport class)."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

from tests.support import ROOT

PACKAGES = ("fastapi", "starlette", "uvicorn", "acp")


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def trees(directory: Path) -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(directory.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes, parameters."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)  # __slots__ entries, setattr names
    return names


def package_private_names() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
        for location in spec.submodule_search_locations:
            for _, tree in trees(Path(location)):
                names |= {name for name in defined_names(tree) if private(name)}
    return names


def test_app_uses_only_public_names_of_its_web_and_acp_libraries() -> None:
    app_trees = list(trees(ROOT / "app"))
    own: set[str] = set()
    for _, tree in app_trees:
        own |= defined_names(tree)
    theirs = package_private_names() - own
    found = []
    for path, tree in app_trees:
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                modules = []
            for module in modules:
                parts = module.split(".")
                if parts[0] in PACKAGES and any(private(part) for part in parts):
                    found.append(f"{where}:{getattr(node, 'lineno', 0)}: import of {module}")
            if isinstance(node, ast.Attribute) and private(node.attr) and node.attr in theirs:
                found.append(f"{where}:{node.lineno}: .{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in theirs
            ):
                found.append(f"{where}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    assert not found, "private names of FastAPI, Starlette, uvicorn or the ACP SDK:\n" + "\n".join(found)
