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

import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "constraints.txt"
EXTRAS = ("test",)  # the extras README's test command installs
HEADER = """\
# Exact versions of every package the project and its test extra install (the whole tree, Python
# 3.11, Linux): README's test command, .ci/run and the Docker image install with this file
# (pip install -c constraints.txt), so what CI tests is what is listed here.
# Generated: python3 scripts/constraints.py (tests/unit/test_constraints.py fails when it drifts).
"""


def _name(text: str) -> tuple[str, list[str]]:
    """The normalised name of a requirement and the extras it asks for (no third-party parser: this
    runs before the venv with ``packaging`` exists)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", text)
    assert match is not None, text
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    return name, [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]


def roots(project: dict[str, Any] | None = None) -> list[str]:
    """The project's requirements and those of its extras, as pyproject.toml states them; an extra
    that names the project itself (``acp-rest-bridge[otel]``) stands for that extra's requirements."""
    if project is None:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    own, _ = _name(project["name"])
    extras = project.get("optional-dependencies", {})
    out: list[str] = []
    seen: set[str] = set()
    todo = [*project["dependencies"], *(f"{project['name']}[{extra}]" for extra in EXTRAS)]
    while todo:
        text = todo.pop(0)
        name, wanted = _name(text)
        if name != own:
            if text not in out:
                out.append(text)
            continue
        for extra in wanted:
            if extra not in seen:
                seen.add(extra)
                todo.extend(extras.get(extra, []))
    return out


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
