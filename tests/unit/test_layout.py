"""The layout holds: no import cycle anywhere in ``app/`` (between modules, and between its packages),
and a session's parts do not depend on ``Session``.

The graph is read from the source (``ast``), not from what a run happens to import: every import
statement counts, at module level, inside functions (loaded when first needed) and under
``if TYPE_CHECKING:`` (names for the type checker), so none of those can hide a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support import ROOT

APP = ROOT / "app"
# What ``Session`` is made of besides the agent link and the translator: they take their session as
# the protocol of what they need (``app/sessions/host.py``), never as a ``Session``.
PARTS = (
    "client_services",
    "file_service",
    "permission_requests",
    "question_requests",
    "recovery",
    "request_book",
    "terminals",
    "held_permissions",
    "turns",
    "prompting",
    "listing",
    "incoming",
    "ended",
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in APP.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules of ``app`` an import statement loads (a name imported from a package that is a
    module of its own counts as that module)."""
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package.pop()
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
    for name in candidates:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module].update(_targets(module, node))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_path_through(graph, set(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _path_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A cycle inside ``component``, as the modules one passes (the first again at the end)."""
    start = min(component)
    parents: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & component):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if target not in parents:
                parents[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle in {component}")


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_no_module_of_app_imports_itself_through_others() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_no_package_of_app_imports_itself_through_others() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        edges = packages.setdefault(_package(module), set())
        edges.update(_package(target) for target in targets if _package(target) != _package(module))
    for targets in list(packages.values()):
        for target in targets:
            packages.setdefault(target, set())
    cycles = _cycles(packages)
    assert not cycles, "import cycles between packages:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_parts_of_a_session_do_not_depend_on_it() -> None:
    graph = _graph()
    for part in PARTS:
        assert f"app.sessions.{part}" in graph, part
        loaded = _closure(graph, f"app.sessions.{part}")
        assert "app.sessions.session" not in loaded, f"{part} depends on app/sessions/session.py"


def test_the_graph_sees_every_kind_of_import() -> None:
    """What the graph reads: relative and absolute imports, in functions and under TYPE_CHECKING."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import phases\n"
        "from .config import SessionConfig\n"
        "import app.errors\n"
        "if TYPE_CHECKING:\n"
        "    from app.events.log import SessionEventLog\n"
        "def later():\n"
        "    from app.sessions import session\n"
    )
    tree = ast.parse(source)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    found = {t for node in imports for t in _targets("app.sessions.manager", node)}
    assert found == {
        "app.sessions.phases",
        "app.sessions.config",
        "app.errors",
        "app.events.log",
        "app.sessions.session",
    }
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_session_stays_small() -> None:
    """``Session`` holds its parts and its lifecycle; the parts do the rest."""
    lines = len((APP / "sessions" / "session.py").read_text().splitlines())
    assert lines < 350, f"app/sessions/session.py has {lines} lines"


def test_a_phase_changes_only_through_the_transition_table() -> None:
    """Only ``Session._set_phase`` (which checks ``TRANSITIONS``) sets a session's phase, after the
    constructor's first one."""
    setters = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, ast.AugAssign | ast.AnnAssign):
                    targets = [node.target]
                if any(isinstance(t, ast.Attribute) and t.attr == "phase" for t in targets):
                    setters.append(f"{module}.{function.name}")
    assert sorted(setters) == ["app.sessions.session.__init__", "app.sessions.session._set_phase"]
