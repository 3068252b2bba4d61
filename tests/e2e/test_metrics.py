"""GET /metrics: the Prometheus text format, parsed with the official parser, after a session of the
real mock agent with permissions. Real server, real agent process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.hitl_support import reply_permission, wait_count
from tests.support import Bridge, create_session, events, send, start_bridge, until_type, wait_for_events

TOKEN = "metrics-token"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("metrics"), token=TOKEN)
    yield server
    server.stop()


def scrape(client: httpx.Client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_metrics_need_the_token(bridge: Bridge) -> None:
    assert httpx.get(bridge.url + "/metrics", timeout=10).status_code == 401


def test_metrics_move_with_a_mock_session_with_permissions(bridge: Bridge, tmp_path: Path) -> None:
    client = bridge.client(TOKEN)
    before = scrape(client)
    create_session(client, "m1")
    send(client, "m1", "permission")
    wait_count(client, "m1", "permission.requested", 2)
    during = scrape(client)
    assert value(during, "acp_bridge_pending_permissions") == 2
    assert value(during, "acp_bridge_sessions", phase="running") >= 1
    assert reply_permission(client, "m1", "mock_1_permission", "once").status_code == 204
    assert reply_permission(client, "m1", "mock_1_permission_denied", "reject").status_code == 204
    wait_count(client, "m1", "permission.resolved", 2)
    # The mock's permission turn ends asking, as legacy's did (no turn.ended); a second turn ends.
    send(client, "m1", "echo done")
    wait_for_events(client, "m1", until_type("turn.ended"))
    with client.stream("GET", "/v1/sessions/m1/events/sse", params={"offset": 0}) as stream:
        assert stream.status_code == 200
        reading = scrape(client)
        assert value(reading, "acp_bridge_sse_readers") == 1
    assert client.post("/v1/sessions/m1/terminate").status_code == 204
    after = scrape(client)

    assert value(after, "acp_bridge_pending_permissions") == 0
    assert value(after, "acp_bridge_sessions", phase="ended") == value(before, "acp_bridge_sessions", phase="ended") + 1
    # Two turns, each ended by the agent's answer.
    assert value(after, "acp_bridge_turns_started_total", agent="mock") == 2
    assert value(after, "acp_bridge_turns_ended_total", agent="mock", stop_reason="end_turn") == 2
    assert value(after, "acp_bridge_turn_duration_seconds_count") == 2
    assert value(after, "acp_bridge_turn_duration_seconds_bucket", le="+Inf") == 2
    assert value(after, "acp_bridge_turn_duration_seconds_sum") > 0
    # Its events, all committed.
    sessions = client.get("/v1/sessions").json()["sessions"]
    count = next(s["eventCount"] for s in sessions if s["sessionId"] == "m1")
    appended = value(after, "acp_bridge_events_appended_total") - value(before, "acp_bridge_events_appended_total")
    assert appended == count
    assert value(after, "acp_bridge_events_committed_total") == value(after, "acp_bridge_events_appended_total")
    assert value(after, "acp_bridge_event_commit_latency_seconds_count") >= 1
    assert value(after, "acp_bridge_event_backlog_bytes") == 0
    # The agent process: started once, ended by the terminate.
    assert value(after, "acp_bridge_agent_processes_started_total", agent="mock") == 1
    assert value(after, "acp_bridge_agent_processes_exited_total", agent="mock", reason="terminated") == 1
    # HTTP requests by route template, method and status, with their durations.
    route = "/v1/sessions/{session_id}/permissions/{permission_id}/reply"
    assert value(after, "acp_bridge_http_requests_total", route=route, method="POST", status="204") == 2
    assert value(after, "acp_bridge_http_request_duration_seconds_count", route=route, method="POST") == 2
    messages = "/v1/sessions/{session_id}/messages"
    assert value(after, "acp_bridge_http_requests_total", route=messages, method="POST", status="204") == 2
    assert value(after, "acp_bridge_http_requests_total", route="/metrics", method="GET", status="200") >= 3
    # Webhooks are not configured: nothing queued, nothing delivered.
    assert value(after, "acp_bridge_webhook_queue_depth") == 0
    assert total(after, "acp_bridge_webhook_deliveries_total") == 0


def test_stop_reasons_an_agent_invents_are_one_series(bridge: Bridge) -> None:
    """An agent's ``stopReason`` is agent-controlled: unknown ones count as ``other``, so /metrics
    does not grow a series per string."""
    client = bridge.client(TOKEN)
    before = scrape(client)
    create_session(client, "reasons")

    def ended_turns(count: int) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda evs: sum(e["type"] == "turn.ended" for e in evs) == count

    for index in range(5):
        send(client, "reasons", f"stopreason made-up-{index}")
        wait_for_events(client, "reasons", ended_turns(index + 1))
    send(client, "reasons", "stopreason max_tokens")
    wait_for_events(client, "reasons", ended_turns(6))
    after = scrape(client)
    ended = "acp_bridge_turns_ended_total"
    assert (
        value(after, ended, agent="mock", stop_reason="other") - value(before, ended, agent="mock", stop_reason="other")
        == 5
    )
    assert value(after, ended, agent="mock", stop_reason="max_tokens") >= 1
    assert not any("made-up" in str(labels) for (_, labels) in after)
    # The events keep the agent's own string.
    reasons = [e["data"] for e in events(client, "reasons") if e["type"] == "turn.ended"]
    assert "made-up-0" in str(reasons[0])
    assert client.post("/v1/sessions/reasons/terminate").status_code == 204
