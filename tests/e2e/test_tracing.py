"""OpenTelemetry traces, exported over OTLP/HTTP (protobuf) by a real server to a receiver on
127.0.0.1 that decodes them with opentelemetry-proto: a POST .../messages with a traceparent header
continues that trace through the turn down to the ACP session/prompt, whose ``_meta.traceparent``
the real mock agent received (its ``meta`` command answers with the prompt's ``_meta``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support import start_bridge, until_type, wait_for_events, wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
CREATE_TRACE = "0af7651916cd43dd8448eb211c80319c"


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    kind: int
    attributes: dict[str, Any]


class Collector:
    """An OTLP/HTTP traces endpoint."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with collector.lock:
                    for resource_spans in request.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            for s in scope_spans.spans:
                                attributes = {
                                    a.key: a.value.WhichOneof("value") and getattr(a.value, a.value.WhichOneof("value"))
                                    for a in s.attributes
                                }
                                collector.spans.append(
                                    Span(
                                        s.trace_id.hex(),
                                        s.span_id.hex(),
                                        s.parent_span_id.hex(),
                                        s.name,
                                        s.kind,
                                        attributes,
                                    )
                                )
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name]

    def by_id(self, span_id: str) -> Span | None:
        with self.lock:
            return next((s for s in self.spans if s.span_id == span_id), None)


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.server.shutdown()
    c.server.server_close()


def test_a_trace_from_post_messages_down_to_the_agents_prompt(tmp_path: Path, collector: Collector) -> None:
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between exports
        "OTEL_SERVICE_NAME": "bridge-under-test",
        "ACP_BRIDGE_LOG_FORMAT": "json",
        "ACP_BRIDGE_LOG_LEVEL": "info",
    }
    bridge = start_bridge(tmp_path, env=env)
    try:
        client = bridge.client()
        created = client.post(
            "/v1/sessions/traced",
            json={"agent": "mock"},
            headers={"traceparent": f"00-{CREATE_TRACE}-{CALLER_SPAN}-01"},
        )
        assert created.status_code == 200, created.text
        response = client.post(
            "/v1/sessions/traced/messages",
            json={"message": "meta"},
            headers={"traceparent": TRACEPARENT, "tracestate": "vendor=opaque"},
        )
        assert response.status_code == 204
        evs = wait_for_events(client, "traced", until_type("turn.ended"))
        texts = [
            part["text"]
            for e in evs
            if e["type"] == "item.completed" and e["data"]["item"]["role"] == "assistant"
            for part in e["data"]["item"]["content"]
            if part.get("type") == "text"
        ]
        received = json.loads(texts[-1])["prompt"]  # the _meta of the session/prompt the agent got

        assert wait_until(lambda: collector.named("session/prompt") and collector.named("turn"), 15), collector.spans
        # The HTTP request's span continues the caller's trace, as a child of the caller's span.
        http = [s for s in collector.named("POST /v1/sessions/{session_id}/messages") if s.trace_id == TRACE_ID]
        assert len(http) == 1, collector.spans
        assert http[0].parent == CALLER_SPAN
        assert http[0].kind == 2  # SERVER
        assert http[0].attributes["http.response.status_code"] == 204
        # The turn is the request's child; the ACP request the turn's.
        (turn,) = [s for s in collector.named("turn") if s.trace_id == TRACE_ID]
        assert turn.parent == http[0].span_id
        assert turn.attributes["session.id"] == "traced"
        assert turn.attributes["acp.stop_reason"] == "end_turn"
        (prompt,) = [s for s in collector.named("session/prompt") if s.trace_id == TRACE_ID]
        assert prompt.parent == turn.span_id
        assert prompt.kind == 3  # CLIENT
        # What the agent received belongs to the same trace: the ACP request's span is its parent.
        assert received["traceparent"] == f"00-{TRACE_ID}-{prompt.span_id}-01"
        assert received["tracestate"] == "vendor=opaque"
        assert received["sandbox-agent/turnId"]  # the bridge's own _meta is still there
        # The handshake's requests of the create are traced too (their own trace: no traceparent).
        assert [s.trace_id for s in collector.named("initialize")] == [CREATE_TRACE]
        assert [s.trace_id for s in collector.named("session/new")] == [CREATE_TRACE]
        # JSON log lines written while a traced request is served carry its trace id.
        lines = [json.loads(line) for line in bridge.log().splitlines() if line.startswith("{")]
        started = [e for e in lines if e["message"].startswith("agent started")]
        assert started and started[0]["trace_id"] == CREATE_TRACE and started[0]["session_id"] == "traced", lines
    finally:
        bridge.stop()
