"""The SSE response itself: a server that stops ends every open stream with a complete body, and
idle streams get their keep-alive meanwhile. Real bridge processes."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import create_session, start_bridge


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stopping_the_server_ends_open_streams_with_a_complete_body(tmp_path: Path, sig: signal.Signals) -> None:
    server = start_bridge(tmp_path, env={"ACP_BRIDGE_SSE_KEEPALIVE": "0.2"})
    bodies: list[bytes] = []
    errors: list[BaseException] = []
    opened = threading.Barrier(3)

    def reader(sid: str) -> None:
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                with client.stream("GET", f"/v1/sessions/{sid}/events/sse") as response:
                    opened.wait(10)
                    bodies.append(b"".join(response.iter_raw()))  # raises on a cut chunked body
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        client = server.client()
        for sid in ("stop-a", "stop-b"):
            create_session(client, sid)
        threads = [threading.Thread(target=reader, args=(sid,)) for sid in ("stop-a", "stop-b")]
        for thread in threads:
            thread.start()
        opened.wait(10)
        time.sleep(0.5)  # keep-alives flow while the streams are idle
        started = time.monotonic()
        server.proc.send_signal(sig)
        server.proc.wait(20)
        assert time.monotonic() - started < 10
        for thread in threads:
            thread.join(20)
    finally:
        server.stop()
    assert not errors, errors
    assert len(bodies) == 2
    for body in bodies:
        assert b"session.started" in body
        assert b": keep-alive\n\n" in body
