"""The transcript writer: file names from session ids, snapshot-at-write, close, failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.acp.transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT, TranscriptWriter, safe_file_stem


def test_file_stems_are_safe_distinct_and_bounded() -> None:
    assert safe_file_stem("abc-1_x.y") == "abc-1_x.y"
    assert safe_file_stem("a/b") == "a%2Fb"
    assert safe_file_stem("..") == "%2E."
    assert safe_file_stem(".hidden") == "%2Ehidden"
    assert safe_file_stem("") == "_"
    assert safe_file_stem("é 100%") == "%C3%A9%20100%25"
    assert safe_file_stem("a/b") != safe_file_stem("a_b")
    long_a, long_b = safe_file_stem("x" * 400 + "a"), safe_file_stem("x" * 400 + "b")
    assert long_a != long_b and len(long_a) < 200 and "/" not in long_a


def test_messages_are_written_as_they_were_when_they_crossed(tmp_path: Path) -> None:
    writer = TranscriptWriter.open(tmp_path / "deep" / "dir", "s1")
    assert writer is not None
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"n": 1}}
    writer.write(CLIENT_TO_AGENT, message)
    message["params"]["n"] = 2  # a later change by a handler does not rewrite history
    writer.write(AGENT_TO_CLIENT, {"jsonrpc": "2.0", "id": 1, "result": {"text": "ü"}})
    writer.close().result(timeout=5)
    writer.write(CLIENT_TO_AGENT, {"late": True})  # after close: ignored
    lines = [json.loads(line) for line in writer.path.read_text(encoding="utf-8").splitlines()]
    assert [line["dir"] for line in lines] == ["client->agent", "agent->client"]
    assert lines[0]["msg"]["params"] == {"n": 1}
    assert lines[1]["msg"]["result"]["text"] == "ü"
    assert writer.close().result(timeout=5) is None  # idempotent


def test_a_reused_session_id_gets_a_new_file(tmp_path: Path) -> None:
    first = TranscriptWriter.open(tmp_path, "same")
    second = TranscriptWriter.open(tmp_path, "same")
    assert first is not None and second is not None
    assert (first.path.name, second.path.name) == ("same.jsonl", "same.1.jsonl")
    first.close().result(timeout=5)
    second.close().result(timeout=5)


def test_an_unusable_directory_means_no_transcript(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert TranscriptWriter.open(blocker, "s1") is None
