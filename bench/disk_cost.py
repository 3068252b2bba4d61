"""What a streamed message costs on disk: the mock's ``burst N SIZE`` (one assistant message in N
chunks of SIZE characters) in a session with a UUID id, and the bytes of its events in the store
(envelope and raw columns, and the database file after a checkpoint) per byte of message text.

    .venv/bin/python -m bench.disk_cost                    # this tree
    .venv/bin/python -m bench.disk_cost --against DIR      # ... and the bridge of checkout DIR
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import uuid
from pathlib import Path

import httpx

from bench.common import ROOT, bridge
from tests.support import wait_until

CASES = [(2000, 16), (500, 256)]  # (chunks, characters each): a token stream, and larger chunks


def measure(root: Path, chunks: int, size: int) -> tuple[int, int, int]:
    """(text bytes, envelope+raw bytes of the session's events, database file bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        session_id = str(uuid.uuid4())
        with bridge(data_dir, root=root) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.post(f"/v1/sessions/{session_id}", json={"agent": "mock"}).status_code == 200
            message = {"message": f"burst {chunks} {size}"}
            assert client.post(f"/v1/sessions/{session_id}/messages", json=message).status_code == 204

            def ended() -> bool:
                page = client.get(f"/v1/sessions/{session_id}/events", params={"offset": 0, "limit": 100_000})
                return any(e["type"] == "turn.ended" for e in page.json()["events"])

            if not wait_until(ended, 120, 0.1):
                raise RuntimeError("the burst did not end in 120 s")
        db = sqlite3.connect(data_dir / "events.sqlite3")
        try:
            (columns,) = db.execute(
                "SELECT sum(length(CAST(json AS BLOB)) + coalesce(length(CAST(raw AS BLOB)), 0)) FROM events"
            ).fetchone()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (pages,) = db.execute("PRAGMA page_count").fetchone()
            (page_size,) = db.execute("PRAGMA page_size").fetchone()
        finally:
            db.close()
        return chunks * size, int(columns), int(pages) * int(page_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, help="another checkout, measured the same way")
    args = parser.parse_args()
    roots = [("this tree", ROOT)] + ([(str(args.against), args.against)] if args.against else [])
    print("| bridge | message | text | events (json + raw) | per text byte | database file | per text byte |")
    print("|---|---|---|---|---|---|---|")
    for name, root in roots:
        for chunks, size in CASES:
            text, columns, file_bytes = measure(root, chunks, size)
            print(
                f"| {name} | {chunks} x {size} chars | {text:,} B | {columns:,} B | {columns / text:.1f}x "
                f"| {file_bytes:,} B | {file_bytes / text:.1f}x |"
            )


if __name__ == "__main__":
    main()
