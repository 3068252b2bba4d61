"""Test tiers: what a test needs beyond Python and the project, as pytest markers, taken from the real
parts it uses so that no test can be mis-marked.

A real part (a PostgreSQL server, Node.js and npm, real agents in a network namespace, Chromium, a
package index on the network, the Docker image, a Linux namespace) is reached only through a fixture declared with
``tier_fixture(tier)`` or a helper declared with ``real_part(tier)``. From those:

- a test whose fixtures (the whole closure pytest resolves for it) include a tier's fixture gets that
  tier's marker: this is how tests are meant to reach real parts;
- a test whose own code, or its fixtures' code, refers to a tier's helper (followed by name through
  the functions and classes of ``tests`` it refers to) must carry that tier's marker, or its module
  fails collection with the path and the fix;
- a tier's helper called, or a tier's fixture set up, while a test without that marker runs fails the
  test (what names cannot show: ``request.getfixturevalue``, a helper handed around).

The fast tier (``FAST``) leaves every tier out and needs nothing but Python.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import types
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

# Each tier: what it needs, the marker's description (registered by tests/conftest.py).
TIERS: dict[str, str] = {
    "realagents": "drives real agents from npm against the fake LLM in a loopback-only network namespace",
    "browser": "drives the inspector in Debian's Chromium",
    "docker": "builds and runs the Docker image",
    "npm": "runs Node.js and npm (installed from PyPI when missing)",
    "postgres": "runs a PostgreSQL server",
    "network": "reaches a package index on the network (PyPI)",
    "namespaces": "makes Linux namespaces with unshare (root, or where user namespaces are allowed)",
}
FAST = "not (" + " or ".join(TIERS) + ")"

# Where a test reaches a package index: only through the `pypi` fixture. Every other process the
# tests start (bridges included) gets an index that refuses at once, so a `pip install` outside the
# network tier fails with this name in its error instead of passing where the network happens to be.
NO_PYPI = "http://127.0.0.1:9/simple/no-package-index-without-the-pypi-fixture/"
PYPI_VARIABLES = ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX")
PYPI_ENV: dict[str, str | None] = {name: os.environ.get(name) for name in PYPI_VARIABLES}

F = TypeVar("F", bound=Callable[..., Any])

# Fixture name -> tier, filled as the fixtures are defined (conftest modules load before the modules
# they serve, and a module's own fixtures before its tests are made into items).
FIXTURES: dict[str, str] = {}
_ATTRIBUTE = "__test_tier__"
_running: pytest.Item | None = None  # the test being run (pytest_runtest_protocol)


def _checked(tier: str) -> str:
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}: one of {', '.join(TIERS)}")
    return tier


def real_part(tier: str) -> Callable[[F], F]:
    """Declares a helper that starts (or needs) a real part of ``tier``."""
    _checked(tier)

    def declare(function: F) -> F:
        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            _refuse_unmarked(tier, f"{function.__module__}.{function.__qualname__}")
            return function(*args, **kwargs)

        setattr(guarded, _ATTRIBUTE, tier)
        return guarded  # type: ignore[return-value]

    return declare


def tier_fixture(tier: str, **options: Any) -> Callable[[F], Any]:
    """``pytest.fixture(**options)`` for a fixture that provides a real part of ``tier``: every test
    using it (directly or through other fixtures) gets the marker."""
    _checked(tier)

    def declare(function: F) -> Any:
        name = options.get("name") or function.__name__
        if FIXTURES.get(name, tier) != tier:
            raise ValueError(f"fixture {name!r} is declared for two tiers: {FIXTURES[name]} and {tier}")
        FIXTURES[name] = tier
        setattr(function, _ATTRIBUTE, tier)
        return pytest.fixture(function, **options)

    return declare


def _refuse_unmarked(tier: str, what: str) -> None:
    item = _running
    if item is not None and item.get_closest_marker(tier) is None:
        pytest.fail(
            f"{item.nodeid} uses {what}, a real part of the {tier} tier ({TIERS[tier]}), without the {tier} "
            f"marker: {_fix(tier)}",
            pytrace=False,
        )


def _fix(tier: str) -> str:
    fixtures = sorted(name for name, t in FIXTURES.items() if t == tier)
    use = f"use the fixture {' or '.join(f'`{f}`' for f in fixtures)}, or " if fixtures else ""
    return f"{use}mark the test with @pytest.mark.{tier} (tests/tiers.py)"


# ---- the plugin (tests/conftest.py loads it) -------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    for name, description in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Markers from fixtures, added as a module's (or class's) tests are made, before ``-m`` selects;
    a module with a test that reaches a real part unmarked fails collection."""
    report: pytest.CollectReport = yield
    if report.passed and isinstance(collector, (pytest.Module, pytest.Class)):
        missing = check([item for item in report.result if isinstance(item, pytest.Function)])
        if missing:
            # One line per test function and tier (not per parameter).
            lines = dict.fromkeys(str(Missing(m.item.split("[")[0], m.tier, m.path)) for m in missing)
            report.outcome = "failed"
            report.longrepr = "tests here reach real parts without their markers:\n" + "\n".join(
                f"  {line}" for line in lines
            )
            report.result = []
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    global _running
    outer, _running = _running, item  # (a run inside a test: the tests of this mechanism)
    try:
        return (yield)
    finally:
        _running = outer


def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> None:
    """A tier's fixture set up while an unmarked test runs (asked for by name, out of its closure)."""
    tier = FIXTURES.get(fixturedef.argname)
    if tier is not None:
        _refuse_unmarked(tier, f"the fixture `{fixturedef.argname}`")


# ---- collection: markers from fixtures, references checked ----------------------------------------
@dataclass(frozen=True)
class Missing:
    item: str
    tier: str
    path: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{self.item} reaches {' -> '.join(self.path)}, a real part of the {self.tier} tier "
            f"({TIERS[self.tier]}), but is not marked {self.tier}: {_fix(self.tier)}"
        )


def check(items: Iterable[pytest.Function]) -> list[Missing]:
    """Adds each test's tier markers from its fixtures; returns the tiers its code reaches unmarked."""
    missing: list[Missing] = []
    for item in items:
        for name in item.fixturenames:
            tier = FIXTURES.get(name)
            if tier is not None and item.get_closest_marker(tier) is None:
                item.add_marker(tier)
        home = item.module.__name__ if item.module is not None else ""
        found = {tier: path[1:] or path for tier, path in _REACH.of(item.obj, home).items()}
        for name in item.fixturenames:
            fixture = _fixture_function(name, item)
            if fixture is not None:
                for tier, path in _REACH.of(fixture, home).items():
                    found.setdefault(tier, (f"fixture {name}", *path[1:]))
        missing += [Missing(item.nodeid, t, p) for t, p in found.items() if item.get_closest_marker(t) is None]
    return missing


def _fixture_function(name: str, item: pytest.Function) -> Any:
    """The fixture ``name`` as ``item`` sees it: its class's or module's, else the nearest conftest's
    (the fixtures of plugins are not the project's and reach none of its real parts)."""
    for namespace in _namespaces(item):
        for value in list(vars(namespace).values()):
            # pytest 8.4 on: a FixtureFunctionDefinition (its `name`); before, the function wrapped.
            if callable(value) and hasattr(value, "__wrapped__") and _fixture_name(value) == name:
                return value
    return None


def _fixture_name(value: Any) -> str | None:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else getattr(value, "__name__", None)


def _namespaces(item: pytest.Function) -> Iterator[Any]:
    if item.cls is not None:
        yield item.cls
    if item.module is not None:
        yield item.module
    conftests = {
        Path(str(module.__file__)).parent: module
        for module in item.config.pluginmanager.get_plugins()
        if isinstance(module, types.ModuleType) and Path(str(getattr(module, "__file__", ""))).name == "conftest.py"
    }
    for directory in Path(str(item.path)).parents:
        if directory in conftests:
            yield conftests[directory]


def _ours(value: Any, home: str) -> bool:
    """Defined by the project's tests (or benchmarks) or by the test module itself."""
    module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
    if not isinstance(module, str) or not module:
        return False
    return module == home or module == "tests" or module.startswith(("tests.", "bench."))


class _Reach:
    """Which tiers a function reaches by the names its code refers to, followed through the functions
    and classes of the project's tests (and of the test module itself); memoised per code object.
    Each tier comes with the path that reaches it, from the function itself."""

    def __init__(self) -> None:
        self.memo: dict[Any, dict[str, tuple[str, ...]]] = {}

    def of(self, target: Any, home: str) -> dict[str, tuple[str, ...]]:
        tier = getattr(target, _ATTRIBUTE, None)
        if tier is not None:
            return {tier: (_label(target),)}
        function = inspect.unwrap(target, stop=lambda f: hasattr(f, _ATTRIBUTE)) if callable(target) else target
        if function is not target:
            return self.of(function, home)
        key = getattr(target, "__code__", target)
        try:
            if key in self.memo:
                return self.memo[key]
        except TypeError:  # unhashable: nothing of ours
            return {}
        self.memo[key] = {}  # (a cycle reaches nothing new)
        found: dict[str, tuple[str, ...]] = {}
        for child in self._children(target, home):
            for tier, path in self.of(child, home).items():
                found.setdefault(tier, (_label(target), *path))
        self.memo[key] = found
        return found

    def _children(self, target: Any, home: str) -> Iterator[Any]:
        if isinstance(target, type):
            for value in vars(target).values():
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                elif isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    yield value
            return
        if not inspect.isfunction(target):
            return
        for cell in target.__closure__ or ():
            try:
                yield from self._worth(cell.cell_contents, home)
            except ValueError:  # an empty cell
                pass
        names = set(_names(target.__code__))
        for name in names:
            # A name of the function's module, or of a module it imports inside its body.
            value = target.__globals__.get(name, sys.modules.get(name))
            if isinstance(value, types.ModuleType):
                if _ours(value, home):
                    for attribute in names:
                        yield from self._worth(getattr(value, attribute, None), home)
            elif value is not None:
                yield from self._worth(value, home)

    def _worth(self, value: Any, home: str) -> Iterator[Any]:
        if hasattr(value, _ATTRIBUTE) or (
            (inspect.isfunction(value) or isinstance(value, type) or hasattr(value, "__wrapped__"))
            and _ours(value, home)
        ):
            yield value


_REACH = _Reach()


def _names(code: types.CodeType) -> Iterator[str]:
    """The global and attribute names a code object and the code nested in it refer to."""
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _names(constant)


def _label(value: Any) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
