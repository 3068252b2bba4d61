"""The client package on its own: its models are the served document's and its sync client the async
one's (generated, no drift), its errors map every status, its README maps the TypeScript SDK and names
the server it is tested against, and it builds as a wheel that installs and works without server code."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import httpx
import pytest
from acp_rest_bridge_client import AsyncSandboxAgent, SandboxAgent, errors

from tests.client.readme import readme_examples
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


def test_sync_client_is_generated_from_the_async_one(tmp_path: Path) -> None:
    """client.py is what generate_sync.py makes of async_client.py; a change to either alone fails."""
    result = subprocess.run(
        [sys.executable, str(CLIENT / "generate_sync.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    spec = importlib.util.spec_from_file_location("generate_sync", CLIENT / "generate_sync.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    changed = tmp_path / "async_client.py"
    source = generator.SOURCE.read_text()
    changed.write_text(
        source.replace("return await self._send(calls.get_health())", "return await self._send(calls.list_agents())")
    )
    vars(generator)["SOURCE"] = changed  # generate() reads the module global
    text = generator.generate()
    assert text != generator.TARGET.read_text()
    assert "def get_health(self) -> HealthResponse:\n        return self._send(calls.list_agents())" in text
    assert "async " not in text and "await " not in text and "asyncio" not in text


# The legacy TypeScript SDK's (sandbox-agent 0.1.12) public methods: each has a row in the client's README.
TS_METHODS = (
    "connect start dispose getHealth listAgents installAgent getAgentModes getAgentModels createSession "
    "listSessions postMessage postMessageStream streamTurn getEvents getEventsSse streamEvents replyQuestion "
    "rejectQuestion replyPermission terminateSession listFsEntries readFsFile writeFsFile deleteFsEntry mkdirFs "
    "moveFs statFs uploadFsBatch"
).split()


def test_readme_maps_every_typescript_method_to_a_python_one() -> None:
    text = (CLIENT / "README.md").read_text()
    table = text[text.index("## From the TypeScript SDK") :]
    rows = re.findall(r"^\| `(?:SandboxAgent\.)?(\w+)\(.*?\| `(?:SandboxAgent\.)?(\w+)\(", table, re.M)
    mapped = dict(rows)
    assert sorted(mapped) == sorted(TS_METHODS)
    public = {name for name in dir(SandboxAgent) if not name.startswith("_")} - {"base_url", "process"}
    named = set(mapped.values()) | set(re.findall(r"`(\w+)\(", table))
    assert set(mapped.values()) - {"SandboxAgent"} <= public
    assert public <= named, public - named  # every method of the client is in the table
    for name in public:
        assert hasattr(AsyncSandboxAgent, name), name


def test_states_the_server_version_it_is_tested_against() -> None:
    """The client's tests run against the server of the same commit: its README names that version."""
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"Tested against acp-rest-bridge {server} " in (CLIENT / "README.md").read_text()


@pytest.mark.usefixtures("pypi")
def test_wheel_installs_alone_and_works(tmp_path: Path) -> None:
    """A wheel built from the client's directory, installed into a fresh venv (httpx from the package
    index) where the server's package is not: it ships its types (mypy --strict reads them from the
    installed wheel) and the docs' sync example runs on it against a real server."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(CLIENT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("acp_rest_bridge_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"acp_rest_bridge_client/py.typed", "acp_rest_bridge_client/models.py"} <= names
    assert not [name for name in names if name.startswith(("app/", "tests/"))]

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600
    )
    assert install.returncode == 0, install.stdout + install.stderr
    work = tmp_path / "work"
    work.mkdir()
    example = work / "example.py"
    example.write_text(readme_examples()[0])
    check = subprocess.run(
        [str(python), "-c", "import importlib.util, acp_rest_bridge_client; print(importlib.util.find_spec('app'))"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
    )
    assert check.returncode == 0 and check.stdout.strip() == "None", check.stdout + check.stderr
    typed = subprocess.run(
        [str(Path(sys.executable).with_name("mypy")), "--strict", "--python-executable", str(python), str(example)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=work,
        env={key: value for key, value in os.environ.items() if key != "MYPYPATH"},
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr
    ran = subprocess.run(
        [str(python), str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env={
            **os.environ,
            "HOME": str(work),
            "ACP_REST_BRIDGE_BIN": str(Path(sys.executable).with_name("acp-rest-bridge")),
        },
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[3] == "Answers: allow-once, allow-once"


@pytest.mark.parametrize(
    ("raised", "cls"),
    [
        (httpx.ConnectError("refused"), errors.ConnectError),
        (httpx.ConnectTimeout("slow"), errors.ConnectError),
        (httpx.ReadTimeout("silent"), errors.RequestTimeoutError),
        (httpx.PoolTimeout("busy"), errors.RequestTimeoutError),
        (httpx.RemoteProtocolError("cut"), errors.ProtocolError),
        (httpx.ReadError("reset"), errors.TransportError),
    ],
)
def test_transport_failures_raise_the_clients_own_classes(raised: httpx.RequestError, cls: type) -> None:
    """What httpx raises becomes the client's class, the httpx error its cause, for the sync and the
    async client alike; an answer that is not the contract's JSON is a ProtocolError."""

    def fail(request: httpx.Request) -> httpx.Response:
        raised.request = request
        raise raised

    with SandboxAgent("http://bridge.test", http=httpx.Client(transport=httpx.MockTransport(fail))) as client:
        with pytest.raises(errors.SandboxAgentError) as info:
            client.list_sessions()
    assert type(info.value) is cls and info.value.__cause__ is raised and info.value.status == 0
    assert "GET http://bridge.test/v1/sessions" in str(info.value)

    async def main() -> None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(fail))
        async with AsyncSandboxAgent("http://bridge.test", http=http) as client:
            with pytest.raises(cls):
                await client.get_health()
        await http.aclose()

    asyncio.run(main())
    garbled = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>"))
    with SandboxAgent("http://bridge.test", http=httpx.Client(transport=garbled)) as client:
        with pytest.raises(errors.ProtocolError) as protocol:
            client.get_health()
    assert isinstance(protocol.value.__cause__, ValueError)
