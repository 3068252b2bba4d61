"""The client package on its own: its models are the served document's (generated, no drift, no
generator warnings), its errors map every status, and it installs and imports without server code."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import httpx
import pytest
from acp_rest_bridge_client import errors

from tests.support import ROOT

CLIENT = ROOT / "clients" / "python"


def test_models_match_the_served_document() -> None:
    result = subprocess.run(
        [sys.executable, str(CLIENT / "generate_models.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "warn" not in result.stderr.lower(), result.stderr


def problem(status: int, kind: str) -> httpx.Response:
    body = {"type": f"urn:sandbox-agent:error:{kind}", "title": kind, "status": status, "detail": kind}
    return httpx.Response(status, json=body)


@pytest.mark.parametrize(
    ("response", "cls"),
    [
        (problem(400, "invalid_request"), errors.InvalidRequestError),
        (problem(400, "unsupported_agent"), errors.UnsupportedAgentError),
        (problem(400, "mode_not_supported"), errors.ModeNotSupportedError),
        (problem(401, "token_invalid"), errors.TokenInvalidError),
        (problem(403, "permission_denied"), errors.PermissionDeniedError),
        (problem(404, "agent_not_installed"), errors.AgentNotInstalledError),
        (problem(404, "session_not_found"), errors.SessionNotFoundError),
        (problem(409, "session_already_exists"), errors.SessionAlreadyExistsError),
        (problem(413, "invalid_request"), errors.InvalidRequestError),
        (problem(500, "install_failed"), errors.InstallFailedError),
        (problem(500, "agent_process_exited"), errors.AgentProcessExitedError),
        (problem(500, "internal_error"), errors.InternalError),
        (problem(502, "stream_error"), errors.StreamError),
        (problem(503, "stream_error"), errors.ServiceUnavailableError),  # storage unavailable
        (problem(503, "service_unavailable"), errors.ServiceUnavailableError),
        (problem(504, "timeout"), errors.AgentTimeoutError),
        (httpx.Response(404, text="not a problem"), errors.NotFoundError),
        (httpx.Response(405), errors.SandboxAgentError),
        (httpx.Response(599, text="?"), errors.ServerError),
    ],
)
def test_every_status_maps_to_a_typed_error(response: httpx.Response, cls: type[errors.SandboxAgentError]) -> None:
    error = errors.error_for(response)
    assert type(error) is cls
    assert error.status == response.status_code


@pytest.mark.usefixtures("pypi")
def test_installs_alone_without_server_code(tmp_path: Path) -> None:
    """pip installs the client's directory into a fresh venv (httpx from the package index); the
    server's package is not there, the client imports and works."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(CLIENT)], capture_output=True, text=True, timeout=600
    )
    assert install.returncode == 0, install.stdout + install.stderr
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util, acp_rest_bridge_client as c; "
            "assert importlib.util.find_spec('app') is None; "
            "print(c.SandboxAgent.__name__, sorted(c.models.UniversalEvent.__annotations__)[0])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["SandboxAgent", "data"]
    typed = env_dir / "lib"
    assert list(typed.glob("python3*/site-packages/acp_rest_bridge_client/py.typed"))
