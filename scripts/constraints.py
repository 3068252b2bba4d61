"""Writes ``constraints.txt``: the exact version of every package the project and its test extra
install (the whole dependency tree, nothing else), as pip resolves them today in a fresh venv.
README's test command, ``.ci/run`` and the Docker image install with it (``pip install -c``), so
what is tested is what is listed; ``tests/unit/test_constraints.py`` fails when it drifts from the
venv the tests run in.

    python3 scripts/constraints.py            # resolve in a fresh venv of this python3, write the file

(``--freeze REQUIREMENT...``, used by the command above inside that venv, prints the pins of the
installed tree of those requirements.)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "constraints.txt"
EXTRAS = ("test",)  # the extras README's test command installs
HEADER = """\
# Exact versions of every package the project and its test extra install (the whole tree, Python
# 3.11, Linux): README's test command, .ci/run and the Docker image install with this file
# (pip install -c constraints.txt), so what CI tests is what is listed here.
# Generated: python3 scripts/constraints.py (tests/unit/test_constraints.py fails when it drifts).
"""


def roots() -> list[str]:
    """The project's requirements and those of its extras, as pyproject.toml states them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(req for extra in EXTRAS for req in extras.get(extra, []))]


def installed_tree(requirements: list[str]) -> dict[str, tuple[str, str]]:
    """{canonical name: (distribution name, installed version)} of every package ``requirements``
    bring in this environment (markers and extras evaluated)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, tuple[str, str]] = {}
    extras_seen: dict[str, set[str]] = {}
    todo = [(Requirement(text), {""}) for text in requirements]
    while todo:
        requirement, context = todo.pop()
        if requirement.marker is not None and not any(requirement.marker.evaluate({"extra": e}) for e in context):
            continue
        key = canonicalize_name(requirement.name)
        wanted = set(requirement.extras)
        if key in found and wanted <= extras_seen[key]:
            continue
        extras_seen[key] = extras_seen.get(key, set()) | wanted
        distribution = metadata.distribution(requirement.name)
        found[key] = (distribution.metadata["Name"], distribution.version)
        for text in distribution.requires or []:
            todo.append((Requirement(text), {"", *wanted}))
    return found


def canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def render(tree: dict[str, tuple[str, str]]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for _, (name, version) in sorted(tree.items()))


def main(argv: list[str]) -> None:
    if argv[:1] == ["--freeze"]:
        sys.stdout.write(render(installed_tree(argv[1:])))
        return
    requirements = roots()
    with tempfile.TemporaryDirectory(prefix="constraints-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "packaging", *requirements], check=True)
        text = subprocess.run(
            [python, __file__, "--freeze", *requirements], check=True, capture_output=True, text=True
        ).stdout
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {text.count('==')} packages")


if __name__ == "__main__":
    main(sys.argv[1:])
