"""The lowest versions ``pyproject.toml`` allows, as uv resolves them with ``--resolution lowest-direct``
(each direct dependency at its floor, everything else at its newest), and the check that each
floor is what gets installed: a floor another package raises (``typing-extensions>=4.12.2`` when
the newest ``typing-inspection`` needs 4.14) claims a version nothing installs or tests.

    python scripts/floors.py [--out FILE]    # compile (PyPI), check the floors, write the set

``.ci/run`` runs the suite on the set it writes; ``tests/unit/test_floors.py`` runs the check.
Exit status 1 names each floor that is not what gets installed, and the version to put instead.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON_VERSION = "3.11"  # Debian 12's, which .ci/run's lowest run uses


def uv() -> str:
    """uv (a test dependency): beside this Python, else on PATH."""
    found = Path(sys.executable).parent / "uv"
    if found.is_file():
        return str(found)
    on_path = shutil.which("uv")
    if on_path is None:
        raise SystemExit("uv is not installed: pip install -c constraints.txt -e '.[test]'")
    return on_path


def compile_lowest(env: dict[str, str] | None = None) -> str:
    """``uv pip compile`` of the project and all its extras at lowest-direct: requirements text with
    uv's ``# via`` annotations."""
    argv = [uv(), "pip", "compile", "--quiet", "--no-header", "--all-extras", "pyproject.toml"]
    argv += ["--resolution", "lowest-direct", "--python-version", PYTHON_VERSION, "--python-platform", "linux"]
    done = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env if env is not None else dict(os.environ)
    )
    if done.returncode != 0:
        raise SystemExit(f"uv pip compile failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def pins(text: str) -> dict[str, tuple[str, list[str]]]:
    """{canonical name: (version, what requires it)} of compiled requirements text."""
    from packaging.utils import canonicalize_name

    found: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = []
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            current = []
            found[canonicalize_name(match.group(1))] = (match.group(2), current)
        elif (via := re.match(r"^\s+#\s+(?:via\s+|\s*)([A-Za-z0-9][^\s(]*)", line)) and via.group(1) != "via":
            current.append(via.group(1))
    return found


def requirements(project: dict[str, Any] | None = None) -> list[str]:
    """Every requirement pyproject.toml states (dependencies and every extra), but the project's own
    extras named in others."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    if project is None:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    own = canonicalize_name(project["name"])
    texts = [
        *project["dependencies"],
        *(t for extra in project.get("optional-dependencies", {}).values() for t in extra),
    ]
    return list(dict.fromkeys(t for t in texts if canonicalize_name(Requirement(t).name) != own))


def problems(stated: list[str], compiled: dict[str, tuple[str, list[str]]], own: str = "acp-rest-bridge") -> list[str]:
    """Each stated requirement whose floor is not the version compiled, or that has no floor."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    out: list[str] = []
    for text in stated:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"sys_platform": "linux", "extra": ""}):
            continue
        key = canonicalize_name(requirement.name)
        floors = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if not floors:
            out.append(f"{text}: no floor (state the lowest version it works with, >=X)")
            continue
        if key not in compiled:
            out.append(f"{text}: not in the compiled set")
            continue
        version, via = compiled[key]
        if Version(version) != Version(floors[0]):
            others = [v for v in via if canonicalize_name(v) not in (key, own)]
            why = (
                f"required by {', '.join(others)} too: one of them asks for more"
                if others
                else "no release below it installs with the other requirements"
            )
            out.append(f"{text}: lowest-direct installs {version} ({why}); make the floor {version}")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="write the compiled lowest set here")
    args = parser.parse_args(argv)
    text = compile_lowest()
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    found = problems(requirements(), pins(text))
    for line in found:
        print(f"pyproject.toml: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
