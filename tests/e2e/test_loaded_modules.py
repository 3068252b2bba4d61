"""A server started in the default configuration loads no module it does not use: metrics
(prometheus_client), tracing (OpenTelemetry's SDK and exporters), PostgreSQL (psycopg), webhooks and
the ACP registry's fetch (httpx) are loaded when configured or first used, not at start.

A real server process (``acp-rest-bridge server``, default settings, the registry's default URL)
reports what it has loaded once it is healthy and has built its whole API (its first
``GET /v1/sessions``); the report is made in the server's own process by a thread the test adds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

from tests.support import ROOT

# Runs ``cli`` with a thread that waits for the first answers, writes sys.modules and stops the server.
PROBE = """
import http.client, json, os, signal, sys, threading, time
from app import startup
from app.main import cli

out = sys.argv[1]
port = []
listen = startup.listen

def recording_listen(host, number):
    sock = listen(host, number)
    port.append(sock.getsockname()[1])
    return sock

startup.listen = recording_listen

def probe():
    deadline = time.monotonic() + 60
    for path in ("/v1/health", "/v1/sessions"):
        while time.monotonic() < deadline:
            try:
                if port:
                    conn = http.client.HTTPConnection("127.0.0.1", port[0], timeout=30)
                    conn.request("GET", path)
                    if conn.getresponse().status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.01)
    with open(out, "w") as fh:
        json.dump(sorted(sys.modules), fh)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
cli(["server", "--port", "0", "--data-dir", sys.argv[2]])
"""

# Loaded only when configured or first used (a prefix names the package and its modules).
NOT_AT_START = (
    "prometheus_client",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "psycopg",
    "psycopg_pool",
    "app.events.postgres",
    "app.sessions.fleet",
    "app.webhooks",
    "standardwebhooks",
    "httpx",
    "httpcore",
    "h11",
    "acp.schema",
    "app.agents.mock",
)


def test_a_server_in_the_default_configuration_loads_only_what_it_uses(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_BRIDGE_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), str(tmp_path / "data")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    loaded = set(json.loads(out.read_text()))
    assert "app.api.sessions" in loaded  # the whole API was built
    unexpected = sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_START))
    assert not unexpected, f"loaded at start in the default configuration: {unexpected}"
    # OpenTelemetry's API alone comes with FastAPI where FastAPI itself needs it (its native
    # telemetry), and with the ACP SDK wherever it is installed (``acp.telemetry`` imports it if it can).
    fastapi_needs_otel = any(r.startswith("opentelemetry-api") for r in requires("fastapi") or [])
    acp_sdk_took_otel = "acp.telemetry" in loaded
    otel = sorted(m for m in loaded if m == "opentelemetry" or m.startswith("opentelemetry."))
    assert fastapi_needs_otel or acp_sdk_took_otel or not otel, otel
