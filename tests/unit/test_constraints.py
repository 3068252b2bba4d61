"""``constraints.txt`` is exactly what the tests run on: every package the project and its test
extra bring, at the version installed here (README's test command installs with it). When it
fails, regenerate the file (``python3 scripts/constraints.py``) or reinstall the venv with it."""

from __future__ import annotations

from scripts import constraints
from tests.support import ROOT


def listed() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_txt_is_what_is_installed() -> None:
    installed = {key: version for key, (_, version) in constraints.installed_tree(constraints.roots()).items()}
    pins = listed()
    problems = [f"{name}: installed, not in constraints.txt" for name in sorted(installed.keys() - pins.keys())]
    problems += [f"{name}: in constraints.txt, not a dependency" for name in sorted(pins.keys() - installed.keys())]
    problems += [
        f"{name}: constraints.txt {pins[name]}, installed {installed[name]}"
        for name in sorted(pins.keys() & installed.keys())
        if pins[name] != installed[name]
    ]
    assert not problems, (
        "constraints.txt is not what this venv has (regenerate: python3 scripts/constraints.py; "
        "or install with: pip install -c constraints.txt -e '.[test]'):\n" + "\n".join(problems)
    )


def test_the_file_is_the_generator_s_rendering() -> None:
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    assert text.startswith(constraints.HEADER)
    lines = text[len(constraints.HEADER) :].splitlines()
    assert lines == sorted(lines, key=lambda line: constraints.canonical(line.partition("==")[0]))


def test_an_extra_that_names_the_project_stands_for_its_requirements() -> None:
    project = {
        "name": "acp-rest-bridge",
        "dependencies": ["fastapi>=0.115", "uvloop>=0.19; sys_platform != 'win32'"],
        "optional-dependencies": {
            "test": ["pytest>=8", "acp-rest-bridge[otel,pg]", "Acp_Rest.Bridge[otel]"],
            "otel": ["opentelemetry-api>=1.25"],
            "pg": ["psycopg[binary]>=3.1", "acp-rest-bridge[otel]"],
        },
    }
    assert constraints.roots(project) == [
        "fastapi>=0.115",
        "uvloop>=0.19; sys_platform != 'win32'",
        "pytest>=8",
        "opentelemetry-api>=1.25",
        "psycopg[binary]>=3.1",
    ]
