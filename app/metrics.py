"""What the server counts, as plain numbers: the services add to them where things happen, and
``GET /metrics`` (``app/api/metrics.py``) turns them into the Prometheus text format when scraped.

Nothing here imports ``prometheus_client`` (it costs tens of milliseconds to load, and the server
answers ``/v1/health`` before any of it is needed); and counting is a dict update, not a metric
object's lock, since the HTTP path and the event writer are benchmarked. Each histogram is written
by one thread only (the event loop, or the event writer for commit latency).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from typing import Any

# Bucket bounds, seconds.
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TURN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# ACP's stop reasons and the bridge's own ("interrupted", "error", "unknown": none given); any other
# string an agent sends is counted as "other" (a label of its own each time would grow without bound).
STOP_REASONS = frozenset(
    ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "interrupted", "error", "unknown")
)


class Histogram:
    """Cumulative buckets as Prometheus wants them are made at scrape time; here one count per bucket."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs, ending with +Inf."""
        result = []
        running = 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            result.append((bound, running))
        return result

    @property
    def count(self) -> int:
        return sum(self.counts)


# ACP's token counts -> the `kind` label of acp_bridge_tokens_total (a fixed set).
TOKEN_KINDS = {
    "inputTokens": "input",
    "outputTokens": "output",
    "cachedReadTokens": "cached_read",
    "cachedWriteTokens": "cached_write",
    "thoughtTokens": "thought",
}


def add(counter: dict[Any, int], key: Hashable, amount: int = 1) -> None:
    counter[key] = counter.get(key, 0) + amount


class Metrics:
    """The server's counters. One instance, built in ``app/main.py`` and handed to the services."""

    def __init__(self) -> None:
        self.turns_started: dict[str, int] = {}  # agent
        self.turns_ended: dict[tuple[str, str], int] = {}  # agent, stop reason
        self.turn_seconds = Histogram(TURN_BUCKETS)
        self.agents_started: dict[str, int] = {}  # agent
        self.agents_exited: dict[tuple[str, str], int] = {}  # agent, reason
        self.installs: dict[tuple[str, str], int] = {}  # agent, outcome
        self.http_requests: dict[tuple[str, str, str], int] = {}  # route, method, status
        self.http_seconds: dict[tuple[str, str], Histogram] = {}  # route, method
        self.events_committed = 0
        self.commit_seconds = Histogram(COMMIT_BUCKETS)  # from an event's append to its commit
        self.webhook_deliveries: dict[str, int] = {}  # outcome
        # What agents said their turns used: tokens by agent and kind, cost in USD by agent.
        self.tokens: dict[tuple[str, str], int] = {}  # agent, kind (TOKEN_KINDS)
        self.cost_usd: dict[str, float] = {}  # agent

    # ---- sessions ----------------------------------------------------------------------------
    def turn_started(self, agent: str) -> float:
        add(self.turns_started, agent)
        return time.monotonic()

    def turn_ended(self, agent: str, stop_reason: str, started: float) -> None:
        # The agent chooses the string: one it may not invent labels without bound.
        add(self.turns_ended, (agent, stop_reason if stop_reason in STOP_REASONS else "other"))
        self.turn_seconds.observe(time.monotonic() - started)

    def turn_usage(self, agent: str, tokens: dict[str, int] | None, cost: tuple[float, str] | None) -> None:
        """A turn's token counts (ACP's names) and cost, as its agent told them. Only USD costs are
        summed (one currency, one bounded series per agent)."""
        for key, kind in TOKEN_KINDS.items():
            count = (tokens or {}).get(key)
            if count:
                add(self.tokens, (agent, kind), count)
        if cost is not None and cost[1] == "USD":
            self.cost_usd[agent] = self.cost_usd.get(agent, 0.0) + cost[0]

    def agent_started(self, agent: str) -> None:
        add(self.agents_started, agent)

    def agent_exited(self, agent: str, reason: str) -> None:
        add(self.agents_exited, (agent, reason))

    def install(self, agent: str, outcome: str) -> None:
        add(self.installs, (agent, outcome))

    # ---- HTTP (the middleware) ---------------------------------------------------------------
    def http_request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method)
        add(self.http_requests, (route, method, str(status)))
        histogram = self.http_seconds.get(key)
        if histogram is None:
            histogram = self.http_seconds[key] = Histogram(HTTP_BUCKETS)
        histogram.observe(seconds)

    # ---- the event writer (its thread) -------------------------------------------------------
    def events_written(self, count: int, oldest_ns: int) -> None:
        self.events_committed += count
        self.commit_seconds.observe(max(time.time_ns() - oldest_ns, 0) / 1e9)

    # ---- webhooks ----------------------------------------------------------------------------
    def webhook_delivery(self, outcome: str) -> None:
        add(self.webhook_deliveries, outcome)
