"""The client under a strict type checker, as its users run one: the docs' Python examples and a program
reading every event type (typed_events.py) pass `mypy --strict` and pyright's strict mode with no
`cast`; and the events a real session sends match the model of their type, so what the checker
narrows to is what arrives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NotRequired, Required

import pytest
from acp_rest_bridge_client import SandboxAgent, models

from tests.client import typed_events
from tests.client.readme import readme_examples
from tests.support import ROOT, Bridge, require_npm, start_bridge

CLIENT_SRC = ROOT / "clients" / "python" / "src"
BIN = Path(sys.executable).parent


def programs(tmp_path: Path) -> list[Path]:
    """The docs' examples and typed_events.py, as files of their own; none of them casts."""
    out = []
    for index, example in enumerate(readme_examples()):
        out.append(tmp_path / f"readme_example_{index}.py")
        out[-1].write_text(example)
    out.append(tmp_path / "typed_events.py")
    out[-1].write_text(Path(typed_events.__file__).read_text())
    for program in out:
        assert not re.search(r"\bcast\(|import .*\bcast\b|type:\s*ignore", program.read_text()), program.name
    return out


def test_programs_pass_mypy_strict(tmp_path: Path) -> None:
    files = programs(tmp_path)
    result = subprocess.run(
        [str(BIN / "mypy"), "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(CLIENT_SRC)},
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.npm
def test_programs_pass_pyright_strict(tmp_path: Path) -> None:
    """pyright from PyPI, which installs the checker itself with npm on its first run."""
    require_npm()
    files = programs(tmp_path)
    config = {"typeCheckingMode": "strict", "extraPaths": [str(CLIENT_SRC)], "pythonVersion": "3.11"}
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    result = subprocess.run(
        [str(BIN / "pyright"), "--pythonpath", sys.executable, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout


# ---- what arrives matches what the checker narrows to ------------------------------------------
def mismatches(value: Any, hint: Any, where: str) -> list[str]:
    """Where ``value`` differs from the type ``hint`` (TypedDicts closed: no key they do not name)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return []
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        hints = typing.get_type_hints(hint, include_extras=True)
        out = [f"{where}.{key}: not in {hint.__name__}" for key in value if key not in hints]
        for key, key_hint in hints.items():
            if key not in value:
                # Not __required_keys__: Python 3.11 cannot read NotRequired in postponed annotations.
                if typing.get_origin(key_hint) is not NotRequired:
                    out.append(f"{where}.{key}: missing from {hint.__name__}")
                continue
            out += mismatches(value[key], key_hint, f"{where}.{key}")
        return out
    if origin in (NotRequired, Required):
        return mismatches(value, typing.get_args(hint)[0], where)
    if origin in (typing.Union, types.UnionType):
        options = [mismatches(value, option, where) for option in typing.get_args(hint)]
        return [] if any(not found for found in options) else min(options, key=len)
    if origin is Literal:
        return [] if value in typing.get_args(hint) else [f"{where}: {value!r} not in {typing.get_args(hint)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        return [m for index, item in enumerate(value) for m in mismatches(item, typing.get_args(hint)[0], where)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        return [m for key, item in value.items() for m in mismatches(item, typing.get_args(hint)[1], f"{where}.{key}")]
    if hint is int:
        return [] if type(value) is int else [f"{where}: {value!r} is not an integer"]
    if isinstance(hint, type):
        return [] if isinstance(value, hint) else [f"{where}: {value!r} is not a {hint.__name__}"]
    raise AssertionError(f"{where}: no check for {hint!r}")


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("typing"))
    yield server
    server.stop()


def test_every_event_of_a_session_matches_its_type(bridge: Bridge) -> None:
    """The mock's demo (items of every kind and part, permissions, questions, an error, an unparsed
    line), the replies, and the session's end: each event is valid as the model its `type` picks,
    and the strict program reads it."""
    with SandboxAgent(bridge.url) as client:
        client.create_session("typed", {"agent": "mock"})
        client.post_message("typed", "demo")
        asked: list[models.UniversalEvent] = []
        with client.stream_events("typed") as live:
            for event in live:
                if event["type"] == "permission.requested" or event["type"] == "question.requested":
                    asked.append(event)
                if event["type"] == "turn.ended":
                    break
        for event in asked:
            if event["type"] == "permission.requested":
                client.reply_permission("typed", event["data"]["permission_id"], "once")
            elif event["type"] == "question.requested":
                client.reply_question(
                    "typed", event["data"]["question_id"], {"answers": [[event["data"]["options"][0]]]}
                )
        client.terminate_session("typed")
        events = client.get_events("typed", limit=10_000)["events"]
    by_type = {
        typing.get_type_hints(variant)["type"].__args__[0]: variant for variant in models.UniversalEvent.__args__
    }
    assert set(by_type) == set(typing.get_args(models.UniversalEventType))
    seen = set()
    for event in events:
        event_type = event["type"]
        seen.add(event_type)
        assert mismatches(event, by_type[event_type], event_type) == []
        assert typed_events.describe(event)
    assert seen == set(by_type), set(by_type) - seen
