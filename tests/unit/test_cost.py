"""The cost guard: what a trivial turn, a 100-chunk burst and ``GET /v1/agents`` cost the server,
counted (``tests/cost.py``: Python calls on every thread of the server, the bridge's own among them,
C calls, the event loop's system calls, the event store's statements, the threads that ran for it),
against the budgets below.
A change that makes one of them cost more fails here, on any machine, however noisy: timing is
what the benchmarks in ``bench/`` do, side by side with the anchor.

The budgets were measured on the versions ``BUDGETS_ENVIRONMENT`` names (CPython and the packages
the path runs through, as ``constraints.txt`` pins them) and hold there with ``HEADROOM``; with other
versions (the suite's run on Debian's Python with the lowest versions) what depends least on them
is held: the store's statements exactly, the bridge's own calls within ``OTHER_VERSIONS_HEADROOM``
(an older uvloop pauses and resumes writing once per answer, which the bridge's transport hooks
follow: 8 calls more per request with uvloop 0.19).

Re-baselining (CONTRIBUTING.md, "The cost test"): after a change that costs less, or one whose extra
cost is meant, run ``.venv/bin/python -m tests.cost`` and write its figures below, saying why in the
commit.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from importlib.metadata import version
from pathlib import Path

from tests.cost import Cost, measure_all

BUDGETS = {
    "turn": Cost(calls=538, bridge_calls=369, c_calls=629, syscalls=9, statements=2, threads=0),
    "burst": Cost(calls=2838, bridge_calls=2556, c_calls=6010, syscalls=12, statements=2, threads=1),
    "health": Cost(calls=77, bridge_calls=40, c_calls=110, syscalls=2, statements=0, threads=0),
    "agents": Cost(calls=87, bridge_calls=46, c_calls=112, syscalls=2, statements=0, threads=0),
    "agents, resolved": Cost(calls=2117, bridge_calls=734, c_calls=1889, syscalls=4, statements=0, threads=0),
}
BUDGETS_ENVIRONMENT = {
    "python": "3.11.7",
    "fastapi": "0.165.0",
    "starlette": "1.10.0",
    "uvicorn": "0.54.0",
    "httptools": "0.9.0",
    "uvloop": "0.23.0",
    "pydantic": "2.14.4",
    "agent-client-protocol": "0.12.1",
}
# A count may come out a little above its budget without a change of the bridge (a callback of the
# loop that runs one pass later): this much is let pass, far less than any change worth a look.
HEADROOM = 0.03
# Held exactly: one statement or one thread hand-off more is a change of design, not noise.
EXACT = ("statements", "threads")
# What is held whatever the versions: the bridge's own code and its statements.
PORTABLE = ("bridge_calls", "statements")
# With other versions than the budgets': how much more of the bridge's own calls is let pass.
OTHER_VERSIONS_HEADROOM = 0.25


def environment() -> dict[str, str]:
    running = {"python": ".".join(map(str, sys.version_info[:3]))}
    running |= {name: version(name) for name in BUDGETS_ENVIRONMENT if name != "python"}
    return running


def test_requests_cost_no_more_than_their_budgets(tmp_path: Path) -> None:
    costs = measure_all(tmp_path)
    pinned = environment() == BUDGETS_ENVIRONMENT
    over = []
    for name, budget in BUDGETS.items():
        cost = costs[name]
        for field in fields(Cost):
            if not pinned and field.name not in PORTABLE:
                continue
            allowed = getattr(budget, field.name)
            measured = getattr(cost, field.name)
            headroom = HEADROOM if pinned else OTHER_VERSIONS_HEADROOM
            if measured > allowed + max(1, int(allowed * headroom)) * (field.name not in EXACT):
                over.append(f"{name}: {field.name} {measured:,} > budget {allowed:,}")
    shown = "\n".join(f"  {name:18} {cost}" for name, cost in costs.items())
    assert not over, "costs over budget:\n  " + "\n  ".join(over) + f"\nmeasured:\n{shown}"
