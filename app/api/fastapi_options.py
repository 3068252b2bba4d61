"""Options of the FastAPI application that depend on the FastAPI version and the environment."""

from __future__ import annotations

import inspect
import os
from typing import Any

# What tells OpenTelemetry (and FastAPI's telemetry) that a provider is configured by the environment.
OTEL_SWITCHES = (
    "OTEL_PYTHON_TRACER_PROVIDER",
    "OTEL_PYTHON_METER_PROVIDER",
    "OTEL_PYTHON_LOGGER_PROVIDER",
)


def app_options() -> dict[str, Any]:
    """Keyword arguments for ``FastAPI()``. FastAPI versions with native OpenTelemetry look at the
    environment on every request to decide whether to trace it; without an OpenTelemetry provider
    configured in the environment when the server starts, that is decided once, here: off."""
    from fastapi import FastAPI

    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    if (
        any(name in os.environ for name in OTEL_SWITCHES)
        or os.environ.get("FASTAPI_OTEL_AUTO_CONFIGURE", "").lower() == "true"
    ):
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def native_telemetry_off() -> bool:
    """FastAPI traces nothing itself (``app_options`` turned its telemetry off, or it has none)."""
    from fastapi import FastAPI

    return "telemetry" not in inspect.signature(FastAPI.__init__).parameters or bool(app_options())
