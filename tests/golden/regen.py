"""Writes the expected events of every golden transcript (review the diff before committing).

    .venv/bin/python -m tests.golden.regen

Project recordings: ``tests/golden/transcripts/<name>.jsonl`` -> ``<name>.expected.json`` beside it.
The shared transcripts (when ``../shared`` is present) -> ``tests/golden/shared/<name>.expected.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.golden.harness import expected_path, replay_transcript, summarize, transcripts


def write_expected(transcript: Path) -> Path:
    target = expected_path(transcript)
    target.parent.mkdir(parents=True, exist_ok=True)
    events = [summarize(d) for d in replay_transcript(transcript)]
    target.write_text(json.dumps({"transcript": transcript.name, "events": events}, indent=1) + "\n", encoding="utf-8")
    return target


def main() -> None:
    for transcript in transcripts():
        print(f"{transcript.name} -> {write_expected(transcript)}")


if __name__ == "__main__":
    main()
