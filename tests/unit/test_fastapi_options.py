"""FastAPI's telemetry is decided once at start: off unless the environment configures OpenTelemetry."""

from __future__ import annotations

import pytest

from app.api import fastapi_options


def test_fastapi_telemetry_is_off_unless_the_environment_configures_opentelemetry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (*fastapi_options.OTEL_SWITCHES, "FASTAPI_OTEL_AUTO_CONFIGURE"):
        monkeypatch.delenv(name, raising=False)
    options = fastapi_options.app_options()
    if options:  # a FastAPI with native telemetry
        assert options == {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "sdk_tracer_provider")
    assert fastapi_options.app_options() == {}
