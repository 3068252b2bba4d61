"""Where FastAPI does work per request, or at start-up, that the bridge does not need.

FastAPI checks every model it is given for a pydantic v1 model by importing ``pydantic.v1``
(~0.1 s of start-up, for nothing: the bridge has no v1 model). No class or object can be a v1 model
unless ``pydantic.v1`` has been imported, so the checks below ask only when it has been, with the
same answer FastAPI's own would give."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

# What tells OpenTelemetry (and FastAPI's telemetry) that a provider is configured by the environment.
OTEL_SWITCHES = (
    "OTEL_PYTHON_TRACER_PROVIDER",
    "OTEL_PYTHON_METER_PROVIDER",
    "OTEL_PYTHON_LOGGER_PROVIDER",
)


def _v1_base() -> type | None:
    v1 = sys.modules.get("pydantic.v1")
    base: type | None = None if v1 is None else v1.BaseModel
    return base


def is_pydantic_v1_model_class(cls: Any) -> bool:
    base = _v1_base()
    return base is not None and isinstance(cls, type) and issubclass(cls, base)


def is_pydantic_v1_model_instance(obj: Any) -> bool:
    base = _v1_base()
    return base is not None and isinstance(obj, base)


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


def install() -> None:
    """Replace FastAPI's checks where FastAPI looks them up (only where they exist)."""
    try:
        from fastapi import encoders
        from fastapi._compat import shared
    except ImportError:  # another FastAPI layout: leave it as it is
        return
    import fastapi._compat as compat

    for module in (shared, compat, encoders):
        for name, check in (
            ("is_pydantic_v1_model_class", is_pydantic_v1_model_class),
            ("is_pydantic_v1_model_instance", is_pydantic_v1_model_instance),
        ):
            if hasattr(module, name):
                setattr(module, name, check)
