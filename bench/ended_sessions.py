"""Memory given back by ended sessions: create a session, fill it with a 5,000-event streamed
message, terminate it; 100 times. The bridge's RSS after the last one should be where it was
after the first (an ended session keeps only its SessionInfo in memory; its events are read
from the store).

    .venv/bin/python -m bench.ended_sessions [--sessions 100] [--events 5000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .common import bridge

TARGET_MB = 10.0


def _wait_turn_end(client: httpx.Client, sid: str, timeout: float = 120) -> None:
    """Follow the session over SSE until its turn ended."""
    deadline = time.monotonic() + timeout
    with client.stream("GET", f"/v1/sessions/{sid}/events/sse", params={"offset": 0}) as response:
        tail = b""
        for chunk in response.iter_raw():
            if b'"type":"turn.ended"' in tail + chunk:
                return
            tail = chunk[-64:]
            if time.monotonic() > deadline:
                break
    raise RuntimeError(f"{sid}: no turn.ended within {timeout}s")


def run(sessions: int, events: int) -> bool:
    print(f"ended sessions: {sessions} sessions, each filled with a {events}-chunk message, then terminated")
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            figures: list[float] = []
            started = time.perf_counter()
            for index in range(sessions):
                sid = f"ended-{index}"
                response = client.post(f"/v1/sessions/{sid}", json={"agent": "mock"})
                response.raise_for_status()
                client.post(f"/v1/sessions/{sid}/messages", json={"message": f"burst {events}"}).raise_for_status()
                _wait_turn_end(client, sid)
                client.post(f"/v1/sessions/{sid}/terminate").raise_for_status()
                listed = client.get("/v1/sessions").json()["sessions"]
                count = next(s["eventCount"] for s in listed if s["sessionId"] == sid)
                assert count >= events, count
                figures.append(server.rss_kib() / 1024)
                if index == 0 or (index + 1) % 10 == 0:
                    print(f"    after {index + 1:3d}: RSS {figures[-1]:.1f} MB ({count} events in the last one)")
            seconds = time.perf_counter() - started
            # Ended sessions still read whole, from the store.
            page = client.get(f"/v1/sessions/ended-{sessions - 1}/events", params={"offset": 0}).json()["events"]
            assert [e["sequence"] for e in page] == list(range(1, len(page) + 1)) and len(page) >= events
    first, last = figures[0], figures[-1]
    grown = last - first
    ok = grown <= TARGET_MB
    print(
        f"ended sessions result: RSS {first:.1f} MB after the first, {last:.1f} MB after {sessions} "
        f"({grown:+.1f} MB, {seconds:.0f} s) -> {'OK' if ok else 'MISSED'} (target within {TARGET_MB:.0f} MB)"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--events", type=int, default=5000)
    args = parser.parse_args()
    sys.exit(0 if run(args.sessions, args.events) else 1)


if __name__ == "__main__":
    main()
