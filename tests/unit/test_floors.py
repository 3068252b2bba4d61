"""Every floor in pyproject.toml is the version uv's lowest-direct resolution installs, as .ci/run's
lowest run installs them (scripts/floors.py): a floor that another package raises, or that no
release matches, fails here instead of claiming a version nothing tests."""

from __future__ import annotations

import pytest

from scripts import floors

COMPILED = """\
anyio==4.16.0
    # via httpx
httpx==0.27.0
    # via acp-rest-bridge (pyproject.toml)
typing-extensions==4.16.0
    # via
    #   acp-rest-bridge (pyproject.toml)
    #   anyio
    #   typing-inspection
uvloop==0.19.0
    # via acp-rest-bridge (pyproject.toml)
"""


def test_a_floor_raised_by_another_package_is_named_with_what_requires_it() -> None:
    stated = ["httpx>=0.27", "typing-extensions>=4.12.2", "uvloop>=0.19; sys_platform != 'win32'"]
    assert floors.problems(stated, floors.pins(COMPILED)) == [
        "typing-extensions>=4.12.2: lowest-direct installs 4.16.0 (required by anyio, typing-inspection too: "
        "one of them asks for more); make the floor 4.16.0"
    ]


def test_a_requirement_without_a_floor_or_outside_the_set_is_named() -> None:
    assert floors.problems(
        ["httpx", "zstandard>=0.22", "pywin32>=300; sys_platform == 'win32'"], floors.pins(COMPILED)
    ) == [
        "httpx: no floor (state the lowest version it works with, >=X)",
        "zstandard>=0.22: not in the compiled set",
    ]


def test_the_project_s_own_extras_are_not_requirements() -> None:
    project = {
        "name": "acp-rest-bridge",
        "dependencies": ["httpx>=0.27"],
        "optional-dependencies": {"test": ["pytest>=8.2", "acp-rest-bridge[otel]"], "otel": ["httpx>=0.27"]},
    }
    assert floors.requirements(project) == ["httpx>=0.27", "pytest>=8.2"]


@pytest.mark.usefixtures("pypi")
def test_every_floor_is_what_lowest_direct_installs() -> None:
    found = floors.problems(floors.requirements(), floors.pins(floors.compile_lowest()))
    assert not found, "pyproject.toml:\n" + "\n".join(found)
