"""What an ended session keeps, counted: after a warm-up, each further create/message/terminate cycle
(a real mock agent process each) may leave at most ``BUDGET`` bytes allocated by the bridge's code
(tracemalloc, allocations with a frame in ``app/``), where it kept ~36 KB: its agent process and
connection objects, its translator and turn queue (now shared by every ended session), an instance
dict of 34 members (slots now). In this process, as tracemalloc sees only its own; the RSS figure
over 1,000 sessions is ``bench/session_churn.py``'s."""

from __future__ import annotations

import gc
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support import ROOT, in_process_bridge

APP_ROOT = ROOT / "app"

BUDGET = 5000  # bytes per ended session (~3,000 measured; what it kept before was ~36 KB)


def cycle(client: httpx.Client, session_id: str) -> None:
    assert client.post(f"/v1/sessions/{session_id}", json={"agent": "mock"}).status_code == 200
    assert client.post(f"/v1/sessions/{session_id}/messages", json={"message": "hello"}).status_code == 204
    deadline = time.monotonic() + 30
    while not any(
        e["type"] == "turn.ended"
        for e in client.get(f"/v1/sessions/{session_id}/events", params={"offset": 0}).json()["events"]
    ):
        assert time.monotonic() < deadline, f"{session_id}: no turn.ended"
        time.sleep(0.01)
    assert client.post(f"/v1/sessions/{session_id}/terminate").status_code == 204


def test_an_ended_session_keeps_a_few_kilobytes(tmp_path: Path) -> None:
    counted = 40
    with in_process_bridge(tmp_path) as client:
        with ThreadPoolExecutor(4) as pool:  # (the agents' start-up is most of a cycle)
            # Caches, the allocator, the first sessions' one-off costs.
            list(pool.map(lambda index: cycle(client, f"warm-{index}"), range(20)))
            gc.collect()
            tracemalloc.start(25)
            try:
                before = tracemalloc.take_snapshot()
                list(pool.map(lambda index: cycle(client, f"counted-{index}"), range(counted)))
                time.sleep(0.5)  # the last one's release, off the request
                gc.collect()
                after = tracemalloc.take_snapshot()
            finally:
                tracemalloc.stop()
    ours = [tracemalloc.Filter(True, str(APP_ROOT) + "/*", all_frames=True)]
    grown = after.filter_traces(ours).compare_to(before.filter_traces(ours), "lineno")
    per_session = sum(stat.size_diff for stat in grown) / counted
    top = "\n".join(f"{stat.size_diff / counted:8.0f} B  {stat.traceback}" for stat in grown[:12])
    assert per_session <= BUDGET, f"{per_session:.0f} B per ended session:\n{top}"
