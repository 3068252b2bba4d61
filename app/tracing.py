"""OpenTelemetry traces (the optional ``otel`` extra): a span per HTTP request, per turn and per ACP
request the bridge sends, with the W3C trace context carried into the ``_meta`` of those requests
(``traceparent``, ``tracestate``), so an agent that traces joins the same trace.

Off unless the standard environment asks for an exporter: ``OTEL_TRACES_EXPORTER`` (``otlp``,
``console``, or any name an installed package registers as an ``opentelemetry_traces_exporter``
entry point) or an ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``; ``OTEL_SDK_DISABLED=true`` wins. The
exporters read the rest of their ``OTEL_*`` settings themselves; spans are exported in batches by
the SDK's own thread. With tracing off nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("acp_rest_bridge.tracing")

# `otlp` is what the specification calls the OTLP exporter; over HTTP here (the gRPC one needs grpcio).
ALIASES = {"otlp": "otlp_proto_http"}


class TracingUnavailable(RuntimeError):
    """The environment asks for traces and the ``otel`` extra is not installed."""


def wanted(env: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for ([] : tracing off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names and (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        names = ["otlp"]
    return [n for n in names if n != "none"]


class Tracing:
    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("acp-rest-bridge")
        self.propagator = TraceContextTextMapPropagator()
        self.kinds = SpanKind

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Tracing | None:
        names = wanted(os.environ if env is None else env)
        if not names:
            return None
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise TracingUnavailable(
                "OTEL_* asks for traces: install the otel extra (in a clone: pip install -e '.[otel]'), "
                f"or unset OTEL_TRACES_EXPORTER and the OTLP endpoint: {exc}"
            ) from exc
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create.
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "acp-rest-bridge"})
        provider = TracerProvider(resource=resource)
        for name in names:
            provider.add_span_processor(BatchSpanProcessor(exporter(name)))
        return cls(provider)

    # ---- spans -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def server_span(self, method: str, headers: list[tuple[bytes, bytes]]) -> Iterator[Span]:
        """The span of one HTTP request, current while it is served; the parent is the request's
        ``traceparent`` when it has one."""
        carrier = {bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1") for k, v in headers}
        parent = self.propagator.extract(carrier) if "traceparent" in carrier else None
        with self.tracer.start_as_current_span(method, context=parent, kind=self.kinds.SERVER) as span:
            yield span

    def current(self) -> Context:
        from opentelemetry.context import get_current

        return get_current()

    def start_span(self, name: str, parent: Context | None = None, **attributes: Any) -> Span:
        """A span that is ended by whoever holds it (a turn's)."""
        return self.tracer.start_span(name, context=parent, attributes=attributes)

    @contextlib.contextmanager
    def use(self, span: Span | None) -> Iterator[None]:
        """``span`` is the parent of the spans started inside (it is not ended here)."""
        if span is None:
            yield
            return
        from opentelemetry.trace import use_span

        with use_span(span, end_on_exit=False):
            yield

    @contextlib.contextmanager
    def client_span(self, method: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The span of an ACP request to the agent; yields the params to send: a copy whose
        ``_meta`` carries this span's ``traceparent`` (and ``tracestate``)."""
        attributes = {"rpc.system": "jsonrpc", "rpc.method": method}
        with self.tracer.start_as_current_span(method, kind=self.kinds.CLIENT, attributes=attributes):
            meta = params.get("_meta")
            carrier: dict[str, str] = {}
            self.propagator.inject(carrier)
            yield {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), **carrier}}

    def shutdown(self) -> None:
        """Export what is left (the SDK waits up to its own timeouts)."""
        self.provider.shutdown()


def exporter(name: str) -> Any:
    """The span exporter registered under ``name`` (the SDK's entry points)."""
    from importlib.metadata import entry_points

    name = ALIASES.get(name, name)
    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        raise TracingUnavailable(f"OTEL_TRACES_EXPORTER: no span exporter named {name!r} is installed")
    return next(iter(found)).load()()
