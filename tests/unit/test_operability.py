"""Pure parts of metrics, webhooks and tracing: histogram buckets, retry delays, webhook ids, which
environment turns tracing on, JSON log lines."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from app.logs import JsonFormatter, current_session
from app.metrics import Histogram
from app.tracing import wanted
from app.webhooks import dispatcher
from app.webhooks.dispatcher import Throttle, retry_delay, webhook_id


def test_histogram_buckets_are_cumulative_with_inf() -> None:
    h = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 2.0):
        h.observe(value)
    assert h.buckets() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)]
    assert h.count == 4
    assert abs(h.total - 2.65) < 1e-9


def test_retry_delays_double_with_jitter_up_to_the_ceiling() -> None:
    for attempts, nominal in ((1, 1.0), (2, 2.0), (3, 4.0), (10, 30.0)):
        for _ in range(50):
            delay = retry_delay(attempts, 1.0, 30.0)
            assert 0.8 * nominal <= delay <= nominal


def test_webhook_id_is_stable_per_event_and_header_safe() -> None:
    assert webhook_id("s1", 3) == webhook_id("s1", 3)
    assert webhook_id("s1", 3) != webhook_id("s1", 4) != webhook_id("s2", 3)
    odd = webhook_id("a/b \u00e9 \ud800", 1)  # any session id, even a lone surrogate
    assert odd.isascii() and " " not in odd


def test_webhook_failure_warnings_are_one_a_minute_per_url_saying_how_many_were_not_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    # The dispatcher's clock only (time.monotonic itself stays, for everything else).
    monkeypatch.setattr(dispatcher, "time", SimpleNamespace(monotonic=lambda: now[0]))
    throttle = Throttle()
    assert throttle.admit("failed http://a") == 0  # the first at once
    assert throttle.admit("failed http://b") == 0  # another URL has its own minute
    for _ in range(3):
        now[0] += 10
        assert throttle.admit("failed http://a") is None
    now[0] = 1000.0 + dispatcher.WARN_EVERY
    assert throttle.admit("failed http://a") == 3  # the next line says 3 were not logged
    assert throttle.admit("failed http://a") is None


def test_tracing_is_off_unless_the_environment_asks() -> None:
    assert wanted({}) == []
    assert wanted({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert wanted({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert wanted({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}) == []


def test_json_log_line_is_one_object_with_the_session() -> None:
    record = logging.LogRecord("acp_rest_bridge.x", logging.WARNING, __file__, 1, "two\nlines %s", ("here",), None)
    token = current_session.set("s-9")
    try:
        line = JsonFormatter().format(record)
    finally:
        current_session.reset(token)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "two\nlines here"
    assert entry["session_id"] == "s-9"
    assert entry["level"] == "warning" and entry["time"].endswith("Z")
