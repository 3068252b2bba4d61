"""Test tiers cannot be mis-marked (tests/tiers.py): a test gets its tier's marker from the fixture of
the real part it uses; one that reaches a real part's helper without the marker fails collection
(its module does), and one that gets there where names cannot show it fails when it runs. Pytest
runs here on modules written for the purpose; nothing real is started (collection only, or a
declared helper that does nothing)."""

from __future__ import annotations

import os
import re

import pytest

from tests import tiers
from tests.support import ROOT

# The inner runs load the plugin and the project's fixtures as tests/conftest.py does, plus two
# helpers declared as real parts that start nothing.
CONFTEST = """
from tests import tiers
from tests.conftest import database_url, npm, postgres, pypi  # the project's tier fixtures
from tests.tiers import real_part, tier_fixture


def pytest_configure(config):
    config.pluginmanager.register(tiers, "tiers")


@real_part("npm")
def pretend_npm():
    return "npm"


@tier_fixture("postgres")
def pretend_database():
    return "postgresql://"
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def collection_errors(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    return result.stdout.str()


def test_a_module_that_starts_postgresql_unmarked_fails_collection(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_store="""
        from tests.postgres import start_postgres

        def test_store():
            server = start_postgres()
        """
    )
    out = collection_errors(inner.runpytest("--collect-only", "-q"))
    assert "ERROR collecting test_store.py" in out
    assert "test_store.py::test_store reaches tests.postgres.start_postgres" in out
    assert "not marked postgres: use the fixture `database_url` or `postgres`" in out


def test_a_module_that_runs_npm_through_its_own_helper_unmarked_fails_collection(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_install="""
        import pytest
        from tests import support

        def node_ready():
            support.require_npm()

        @pytest.fixture
        def installed():
            node_ready()

        def test_plain():
            pass

        def test_install(installed):
            pass
        """
    )
    out = collection_errors(inner.runpytest("--collect-only", "-q"))
    assert "ERROR collecting test_install.py" in out
    # The path it takes is named; the test that reaches nothing is not.
    path = r"test_install\.py::test_install reaches fixture installed -> \S+\.node_ready -> tests\.support\.require_npm"
    assert re.search(path + ", a real part of the npm tier", out), out
    assert "test_plain" not in out


def test_the_marker_or_the_fixture_is_enough(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_marked="""
        import pytest
        from tests.postgres import start_postgres
        from tests.support import require_npm

        @pytest.mark.postgres
        def test_server():
            start_postgres()

        @pytest.mark.npm
        def test_node():
            require_npm()

        def test_fixture(database_url):
            pass

        def test_npm_fixture(npm):
            pass

        def test_fast():
            pass
        """
    )
    result = inner.runpytest("--collect-only", "-q", "-m", tiers.FAST)
    result.assert_outcomes()
    assert "4 deselected" in result.stdout.str()
    assert "test_marked.py::test_fast" in result.stdout.str()
    # The fixture gave `npm` its marker (and `database_url` `postgres`, beside the module's).
    result = inner.runpytest("--collect-only", "-q", "-m", "npm")
    assert "test_marked.py::test_node" in result.stdout.str() and "test_npm_fixture" in result.stdout.str()
    assert "3 deselected" in result.stdout.str()


def test_a_helper_reached_where_names_do_not_show_fails_the_test(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_hidden="""
        import importlib
        import pytest

        def test_by_name():
            helper = getattr(importlib.import_module("conftest"), "pretend_" + "npm")
            helper()

        @pytest.mark.npm
        def test_marked_by_name():
            assert getattr(importlib.import_module("conftest"), "pretend_" + "npm")() == "npm"

        def test_fixture_by_name(request):
            request.getfixturevalue("pretend_" + "database")
        """
    )
    result = inner.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "test_hidden.py::test_by_name uses conftest.pretend_npm, a real part of the npm tier" in out
    assert "without the npm marker: use the fixture `npm`" in out
    assert "test_fixture_by_name uses the fixture `pretend_database`, a real part of the postgres tier" in out


def test_no_package_index_without_the_pypi_fixture() -> None:
    for name in tiers.PYPI_VARIABLES:
        assert os.environ[name] == tiers.NO_PYPI


@pytest.mark.usefixtures("pypi")
def test_the_pypi_fixture_gives_the_configured_index(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("network") is not None
    for name in tiers.PYPI_VARIABLES:
        assert os.environ.get(name) == tiers.PYPI_ENV[name]


def test_the_documented_fast_tier_is_the_tiers() -> None:
    # CONTRIBUTING.md (README.md before the test infrastructure moved there).
    documents = [ROOT / name for name in ("README.md", "CONTRIBUTING.md") if (ROOT / name).exists()]
    assert any(f'-m "{tiers.FAST}"' in path.read_text(encoding="utf-8") for path in documents)
    assert "from tests.tiers import FAST" in (ROOT / "scripts" / "check").read_text(encoding="utf-8")
