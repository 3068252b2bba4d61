"""The server answers ``GET /v1/health`` as soon as its services run, and builds the HTTP application
right after: a request racing that build waits for it and gets the application's answer; a build
that fails stops the server with a one-line reason. A real uvicorn on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from app import main, startup
from app.settings import Settings
from tests.support import ROOT, wait_until

ORIGIN = "http://localhost:5173"


@contextmanager
def serve(
    tmp: Path, build_gate: threading.Event, monkeypatch: pytest.MonkeyPatch, fail: Exception | None = None, **kw: Any
) -> Iterator[tuple[str, startup.Front, list[str], uvicorn.Server]]:
    """A real uvicorn running the server's front, whose HTTP application is built only once
    ``build_gate`` is set (then raising ``fail`` if given)."""
    real_create_api = main.create_api

    def gated_create_api(services: main.Services, lifespan: Any = None) -> Any:
        assert build_gate.wait(30)
        if fail is not None:
            raise fail
        return real_create_api(services, lifespan)

    monkeypatch.setattr(main, "create_api", gated_create_api)
    settings = Settings(data_dir=tmp / "data", cors_allow_origin=[ORIGIN], **kw)
    services = main.Services(settings)
    failures: list[str] = []
    server: uvicorn.Server

    def on_failure(reason: str) -> None:
        failures.append(reason)
        server.should_exit = True

    front = main.create_front(services, on_failure)
    sock = startup.listen("127.0.0.1", 0)
    config = uvicorn.Config(front, log_level="warning", access_log=False, ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, 30), "server did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", front, failures, server
    finally:
        build_gate.set()
        server.should_exit = True
        thread.join(30)
        sock.close()


def answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = [(k, v) for k, v in response.headers.multi_items() if k not in ("date", "server")]
    return response.status_code, headers, response.content


def test_health_before_the_build_is_the_application_s_answer_and_a_racing_request_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    with serve(tmp_path, gate, monkeypatch) as (url, front, failures, _), ThreadPoolExecutor(2) as pool:
        early = [answer(httpx.get(url + "/v1/health", headers=h)) for h in ({}, {"origin": ORIGIN})]
        assert early[0][0] == 200 and early[0][2] == b'{"status":"ok"}'
        assert ("access-control-allow-origin", ORIGIN) in early[1][1]
        head = httpx.head(url + "/v1/health")
        assert (head.status_code, head.content) == (200, b"")  # HEAD as GET, before the build too
        assert front.app is None  # answered before the application exists
        racing: Callable[[], httpx.Response] = lambda: httpx.get(url + "/v1/agents", timeout=30)  # noqa: E731
        waiting = pool.submit(racing)
        preflight = pool.submit(
            lambda: httpx.options(
                url + "/v1/agents", headers={"origin": ORIGIN, "access-control-request-method": "GET"}
            )
        )
        assert not waiting.done() and not preflight.done()
        gate.set()
        response = waiting.result(30)
        assert response.status_code == 200, response.text
        assert any(agent["id"] == "mock" for agent in response.json()["agents"])
        assert preflight.result(30).status_code == 200
        assert wait_until(lambda: front.app is not None, 30)
        late = [answer(httpx.get(url + "/v1/health", headers=h)) for h in ({}, {"origin": ORIGIN})]
        assert late == early  # the same bytes and headers before and after the build
        # A path that only looks like health (encoded) is the application's to answer: 404.
        assert httpx.get(url + "/v1/%68ealth").status_code == 404
    assert failures == []


def test_a_request_that_outwaits_the_build_gets_a_503_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    with serve(tmp_path, gate, monkeypatch, token="secret") as (url, front, _, _):
        front.wait = 0.2
        response = httpx.get(url + "/v1/agents", headers={"authorization": "Bearer secret", "origin": ORIGIN})
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/json"
        assert response.headers["access-control-allow-origin"] == ORIGIN
        problem = response.json()
        assert problem["type"] == "urn:sandbox-agent:error:service_unavailable"
        assert "still starting" in problem["detail"]
        # Auth is checked before anything else, as by the application.
        assert httpx.get(url + "/v1/agents").status_code == 401
        assert httpx.get(url + "/v1/health").status_code == 200


def test_a_failed_build_answers_503_and_stops_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    with serve(tmp_path, gate, monkeypatch, fail=RuntimeError("boom")) as (url, _, failures, server):
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(lambda: httpx.get(url + "/v1/agents", timeout=30))
            # The request is in the server (a failed build stops it: a later one would be refused).
            assert wait_until(lambda: bool(server.server_state.tasks), 30)
            gate.set()
            response = waiting.result(30)
        assert response.status_code == 503
        assert "cannot build the HTTP application: RuntimeError: boom" in response.json()["detail"]
        assert wait_until(lambda: failures != [], 30)
        assert failures == ["cannot build the HTTP application: RuntimeError: boom"]


def test_the_server_exits_with_one_line_when_its_application_cannot_be_built(tmp_path: Path) -> None:
    """A broken install (FastAPI not importable): the server starts, then stops with the reason."""
    shadow = tmp_path / "shadow"
    (shadow / "fastapi").mkdir(parents=True)
    (shadow / "fastapi" / "__init__.py").write_text("raise ImportError('fastapi is broken here')\n")
    argv = [sys.executable, "-m", "app", "server", "--port", "0", "--data-dir", str(tmp_path / "data")]
    env = {"PYTHONPATH": f"{shadow}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "acp-rest-bridge listening on" in result.stderr  # it started without FastAPI
    last = result.stderr.strip().splitlines()[-1]
    assert last == "acp-rest-bridge: cannot build the HTTP application: ImportError: fastapi is broken here"


def test_what_answers_health_loads_neither_fastapi_nor_the_acp_sdk() -> None:
    """The start-up cost: the command line and the services import no FastAPI, Starlette or
    ACP SDK (the application and the first session load them)."""
    code = (
        "import sys, app.main, app.startup, app.api.middleware\n"
        "heavy = {'fastapi', 'starlette', 'acp'}\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & heavy)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
