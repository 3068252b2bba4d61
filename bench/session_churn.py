"""What an ended session keeps: ``--warmup`` cycles of create, one message, terminate, then
``--cycles`` more; the bridge's RSS may grow by at most 5 MB per 1,000 sessions over the second
part (caches and the allocator settle during the first). ``--concurrency`` cycles run at once.

    .venv/bin/python -m bench.session_churn [--warmup 1000] [--cycles 1000] [--concurrency 4]

``tests/e2e/test_ended_sessions.py`` counts, at a smaller scale, the bytes each ended session keeps.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from .common import bridge

TARGET_MB_PER_1000 = 5.0


def cycle(client: httpx.Client, session_id: str) -> None:
    """Create a mock session, send it a message, wait for its turn's end, terminate it."""
    client.post(f"/v1/sessions/{session_id}", json={"agent": "mock"}).raise_for_status()
    client.post(f"/v1/sessions/{session_id}/messages", json={"message": "hello"}).raise_for_status()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        page = client.get(f"/v1/sessions/{session_id}/events", params={"offset": 0}).json()["events"]
        if any(e["type"] == "turn.ended" for e in page):
            break
        time.sleep(0.01)
    else:
        raise RuntimeError(f"{session_id}: no turn.ended in 30 s")
    client.post(f"/v1/sessions/{session_id}/terminate").raise_for_status()


def churn(url: str, prefix: str, count: int, concurrency: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as client, ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(cycle, client, f"{prefix}-{i}") for i in range(count)]:
            future.result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    print(f"session churn: {args.warmup} create/message/terminate cycles, then {args.cycles} more")
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
        started = time.perf_counter()
        churn(server.url, "warm", args.warmup, args.concurrency)
        time.sleep(2)  # the last ended sessions' memory handed back (malloc_trim, off the loop)
        before = server.rss_kib() / 1024
        churn(server.url, "churn", args.cycles, args.concurrency)
        time.sleep(2)
        after = server.rss_kib() / 1024
        seconds = time.perf_counter() - started
    grown = after - before
    allowed = TARGET_MB_PER_1000 * args.cycles / 1000
    ok = grown <= allowed
    print(
        f"session churn result: RSS {before:.1f} MB after {args.warmup}, {after:.1f} MB after {args.cycles} more "
        f"({grown:+.1f} MB, {grown * 1024 / args.cycles:.1f} KB per session; {seconds:.0f} s) -> "
        f"{'OK' if ok else 'MISSED'} (target at most {allowed:.1f} MB)"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
