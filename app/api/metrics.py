"""``GET /metrics``: the Prometheus text format of the server's counters (``app/metrics.py``) and
of what is true right now (sessions by phase, pending requests, readers, backlogs), made when
scraped by one collector on the server's own registry (built in ``app/main.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from .routing import BridgeRoute

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from app.metrics import Histogram, Metrics
    from app.sessions.manager import SessionManager

router = APIRouter(route_class=BridgeRoute)

PREFIX = "acp_bridge_"
PHASES = ("starting", "running", "ending", "ended", "suspended")


class BridgeCollector:
    """Everything the bridge exposes, as metric families (prometheus_client's custom collector)."""

    def __init__(
        self,
        metrics: Metrics,
        manager: SessionManager,
        store: Any,
        webhook_queue: Callable[[], int] | None = None,
    ) -> None:
        self.metrics = metrics
        self.manager = manager
        self.store = store
        self.webhook_queue = webhook_queue

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        m = self.metrics

        def counter(name: str, doc: str, labels: tuple[str, ...], values: dict[Any, int]) -> CounterMetricFamily:
            family = CounterMetricFamily(PREFIX + name, doc, labels=list(labels))
            for key, value in sorted(values.items()):
                family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
            return family

        def histogram(name: str, doc: str, labels: tuple[str, ...], values: dict[Any, Histogram]) -> Any:
            family = HistogramMetricFamily(PREFIX + name, doc, labels=list(labels))
            for key, h in sorted(values.items()):
                family.add_metric(list(key), h.buckets(), h.total)
            return family

        # Sessions and what waits in them, now.
        sessions = self.manager.list()
        phases = dict.fromkeys(PHASES, 0)
        permissions = questions = readers = 0
        for session in sessions:
            phases[session.phase.value] = phases.get(session.phase.value, 0) + 1
            readers += session.log.subscriber_count
        for local in self.manager.local():  # (another bridge's requests wait there)
            permissions += len(local.permissions.open)
            questions += len(local.questions.open)
        family = GaugeMetricFamily(PREFIX + "sessions", "Sessions by phase", labels=["phase"])
        for phase, count in phases.items():
            family.add_metric([phase], count)
        yield family
        yield GaugeMetricFamily(
            PREFIX + "pending_permissions", "Permission requests waiting for a reply", value=permissions
        )
        yield GaugeMetricFamily(PREFIX + "pending_questions", "Questions waiting for a reply", value=questions)
        yield GaugeMetricFamily(PREFIX + "sse_readers", "Open SSE event streams", value=readers)

        # Turns.
        yield counter("turns_started", "Turns started", ("agent",), m.turns_started)
        yield counter("turns_ended", "Turns ended, by stop reason", ("agent", "stop_reason"), m.turns_ended)
        yield histogram("turn_duration_seconds", "Turn duration, start to end", (), {(): m.turn_seconds})

        # Events.
        store = self.store
        yield CounterMetricFamily(
            PREFIX + "events_appended", "Events handed to the store", value=getattr(store, "appended_events", 0)
        )
        yield CounterMetricFamily(
            PREFIX + "events_committed", "Events committed to the store", value=m.events_committed
        )
        yield histogram(
            "event_commit_latency_seconds",
            "From an event's append to its commit (the oldest of each batch)",
            (),
            {(): m.commit_seconds},
        )
        yield GaugeMetricFamily(
            PREFIX + "event_backlog_bytes",
            "Bytes of events waiting to be committed",
            value=getattr(store, "pending_bytes", 0),
        )

        # Agents and installs.
        yield counter("agent_processes_started", "Agent processes started", ("agent",), m.agents_started)
        yield counter(
            "agent_processes_exited", "Agent processes ended, by reason", ("agent", "reason"), m.agents_exited
        )
        yield counter("installs", "Agent installs, by outcome", ("agent", "outcome"), m.installs)

        # What the agents said their turns used.
        yield counter("tokens", "Tokens the agents' turns used, by kind", ("agent", "kind"), m.tokens)
        cost = CounterMetricFamily(PREFIX + "cost_usd", "Cost of the agents' turns, in USD", labels=["agent"])
        for agent, amount in sorted(m.cost_usd.items()):
            cost.add_metric([agent], amount)
        yield cost

        # HTTP.
        yield counter(
            "http_requests",
            "HTTP requests by route template, method and status",
            ("route", "method", "status"),
            m.http_requests,
        )
        yield histogram("http_request_duration_seconds", "HTTP request duration", ("route", "method"), m.http_seconds)

        # Webhooks.
        yield counter("webhook_deliveries", "Webhook deliveries, by outcome", ("outcome",), m.webhook_deliveries)
        yield GaugeMetricFamily(
            PREFIX + "webhook_queue_depth",
            "Webhook deliveries waiting to be made",
            value=self.webhook_queue() if self.webhook_queue is not None else 0,
        )


@router.get("/metrics", include_in_schema=False)
async def get_metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry: CollectorRegistry = request.app.state.metrics_registry()
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
