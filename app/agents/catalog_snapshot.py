"""Make the ACP registry snapshot shipped with the package (``app/agents/data/acp_registry.json``).

From a checkout of https://github.com/agentclientprotocol/registry (its ``<id>/agent.json`` files;
directories starting with ``_`` or ``.`` are not agents), or from a published ``registry.json``::

    python -m app.agents.catalog_snapshot /path/to/registry            # date: the checkout's last commit
    python -m app.agents.catalog_snapshot registry.json --date 2026-11-26

Only what the bridge needs is kept (id, name, version, description, distribution), sorted by id,
with the date the registry was in that state.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .acp_catalog import SNAPSHOT, parse_agent

OUT = Path(__file__).resolve().parent / "data" / SNAPSHOT


def _entries(source: Path) -> list[Any]:
    if source.is_file():
        data = json.loads(source.read_text(encoding="utf-8"))
        return list(data.get("agents") or [])
    entries = []
    for path in sorted(source.glob("*/agent.json")):
        if path.parent.name.startswith(("_", ".")):
            continue
        entries.append(json.loads(path.read_text(encoding="utf-8")))
    return entries


def _commit_date(source: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "log", "-1", "--format=%cI"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def snapshot(source: Path, date: str | None) -> dict[str, Any]:
    agents = []
    for entry in _entries(source):
        agent = parse_agent(entry)
        if agent is None:
            print(f"skipped: {json.dumps(entry)[:200]}", file=sys.stderr)
            continue
        agents.append(agent.to_json())
    agents.sort(key=lambda a: a["id"])
    when = date or (_commit_date(source) if source.is_dir() else None)
    if when is None:
        raise SystemExit("the registry's date is unknown: give --date")
    return {
        "date": when,
        "source": "https://github.com/agentclientprotocol/registry",
        "agents": agents,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.agents.catalog_snapshot", description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="a registry checkout, or a registry.json file")
    parser.add_argument("--date", help="the date of the registry's state (default: the checkout's last commit)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write it (default {OUT})")
    args = parser.parse_args(argv)
    data = snapshot(args.source, args.date)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(data['agents'])} agents, {data['date']}")


if __name__ == "__main__":
    main()
