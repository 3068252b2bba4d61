"""What the HTTP middleware costs per request, alone (a trivial app behind it): without metrics,
with metrics (as the server runs), and with metrics and tracing (spans made, none exported).

    .venv/bin/python -m bench.middleware [--count 5000] [--rounds 30]

Prints microseconds of this thread's CPU time per request, the best round of each variant (the rounds
alternate, so load on the machine affects them alike).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from app.api.middleware import BridgeMiddleware, Message, Scope
from app.metrics import Metrics


class Route:
    path = "/v1/sessions/{session_id}/messages"


async def app(scope: Scope, receive: Any, send: Any) -> None:
    scope["route"] = Route  # as FastAPI leaves the matched route
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def send(message: Message) -> None:
    pass


async def receive() -> Message:
    return {"type": "http.request", "body": b""}


def middleware(metrics: Metrics | None, tracing: Any = None) -> BridgeMiddleware:
    return BridgeMiddleware(
        app,
        token=None,
        body_limit=1024,
        on_error=lambda exc: None,
        cors_origins=[],
        cors_methods=[],
        cors_headers=[],
        cors_credentials=False,
        metrics=metrics,
        tracing=tracing,
    )


async def round_of(layer: BridgeMiddleware, count: int) -> float:
    start = time.thread_time()
    for _ in range(count):
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/sessions/s/messages",
            "raw_path": b"/v1/sessions/s/messages",
            "headers": [(b"host", b"127.0.0.1"), (b"content-length", b"2")],
        }
        await layer(scope, receive, send)
    return (time.thread_time() - start) / count * 1e6


def tracing_variant() -> Any:
    try:
        from opentelemetry.sdk.trace import TracerProvider

        from app.tracing import Tracing
    except ImportError:
        return None
    return Tracing(TracerProvider())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    variants = {"no metrics": middleware(None), "metrics": middleware(Metrics())}
    tracing = tracing_variant()
    if tracing is not None:
        variants["metrics + tracing"] = middleware(Metrics(), tracing)
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(args.rounds):
        for name, layer in variants.items():
            best[name] = min(best[name], await round_of(layer, args.count))
    for name, value in best.items():
        print(f"{name:18} {value:6.2f} us/request")


if __name__ == "__main__":
    asyncio.run(main())
