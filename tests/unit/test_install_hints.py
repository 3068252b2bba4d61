"""What the server says when an optional extra is missing names an install that works from a clone
(the package is not on an index yet: docs/versions.md), never ``pip install 'acp-rest-bridge[...]'``."""

from __future__ import annotations

import sys

import pytest

from app.events import postgres
from app.events.store import StoreError
from app.tracing import Tracing, TracingUnavailable


def test_the_postgres_extra_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(StoreError, match=r"pip install -e '\.\[postgres\]'"):
        postgres._psycopg()


def test_the_otel_extra_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)
    with pytest.raises(TracingUnavailable, match=r"pip install -e '\.\[otel\]'"):
        Tracing.from_environment({"OTEL_TRACES_EXPORTER": "console"})
