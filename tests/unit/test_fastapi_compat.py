"""What the bridge changes in FastAPI's per-request and start-up work keeps FastAPI's answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.api import _fastapi_compat
from tests.support import ROOT


def test_the_app_is_built_and_documented_without_importing_pydantic_v1() -> None:
    code = (
        "import sys, warnings\n"
        "from app.main import create_app\n"
        "create_app().openapi()\n"
        "assert 'pydantic.v1' not in sys.modules, 'pydantic.v1 imported'\n"
        "assert 'sse_starlette' not in sys.modules, 'sse_starlette imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_v1_checks_answer_as_fastapi_does_once_pydantic_v1_is_loaded() -> None:
    import warnings

    from pydantic import BaseModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pydantic import v1

    class New(BaseModel):
        x: int = 0

    class Old(v1.BaseModel):
        x: int = 0

    assert _fastapi_compat.is_pydantic_v1_model_class(Old)
    assert not _fastapi_compat.is_pydantic_v1_model_class(New)
    assert not _fastapi_compat.is_pydantic_v1_model_class(int)
    assert not _fastapi_compat.is_pydantic_v1_model_class("not a class")
    assert _fastapi_compat.is_pydantic_v1_model_instance(Old())
    assert not _fastapi_compat.is_pydantic_v1_model_instance(New())


def test_fastapi_telemetry_is_off_unless_the_environment_configures_opentelemetry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (*_fastapi_compat.OTEL_SWITCHES, "FASTAPI_OTEL_AUTO_CONFIGURE"):
        monkeypatch.delenv(name, raising=False)
    options = _fastapi_compat.app_options()
    if options:  # a FastAPI with native telemetry
        assert options == {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "sdk_tracer_provider")
    assert _fastapi_compat.app_options() == {}
