"""Running a server as a child process, as the legacy TypeScript SDK's ``SandboxAgent.start`` does."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from .errors import SandboxAgentError

# The server's start-up line: "acp-rest-bridge listening on http://127.0.0.1:PORT; ..."
LISTENING = re.compile(r"listening on (http://\S+?);")


class SpawnError(SandboxAgentError, RuntimeError):
    """The server could not be started (no binary, it exited, it did not become healthy in time)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, None, None)
        self.args = (message,)


@dataclass
class BridgeProcess:
    """A server started by ``spawn_bridge``."""

    process: subprocess.Popen[bytes]
    base_url: str
    token: str
    output: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode


def find_binary(binary: str | os.PathLike[str] | None) -> str:
    candidate = os.fspath(binary) if binary is not None else os.environ.get("ACP_REST_BRIDGE_BIN")
    if candidate:
        found = shutil.which(candidate)
        if found:
            return found
        raise SpawnError(f"acp-rest-bridge binary not found or not executable: {candidate}")
    # Beside this Python too: a program run with a venv's python (not activated) finds the server
    # installed in that venv.
    found = shutil.which("acp-rest-bridge") or shutil.which("acp-rest-bridge", path=sysconfig.get_path("scripts"))
    if found is None:
        raise SpawnError(
            f"acp-rest-bridge is not on PATH nor in {sysconfig.get_path('scripts')}: install it, or pass binary= "
            "or set ACP_REST_BRIDGE_BIN"
        )
    return found


def spawn_bridge(
    *,
    binary: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    args: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    log: str = "inherit",
    timeout: float = 30.0,
) -> BridgeProcess:
    """Starts ``acp-rest-bridge server`` and returns once ``GET /v1/health`` answers 200. The port the
    server bound (``port=0``: any free one, no race) is read from its start-up line."""
    if log not in ("inherit", "silent"):
        raise ValueError("log must be 'inherit' or 'silent'")
    token = token or secrets.token_hex(24)
    argv = [find_binary(binary), "server", "--host", host, "--port", str(port), "--token", token, *args]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    found = threading.Event()
    urls: list[str] = []
    output: list[str] = []

    def pump() -> None:
        # Reads the server's output until it exits: the start-up line gives the URL; the rest is
        # passed on (log="inherit") so the pipe never fills up.
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace")
            if len(output) < 200:
                output.append(line)
            if not urls:
                match = LISTENING.search(line)
                if match:
                    urls.append(match.group(1))
                    found.set()
            if log == "inherit":
                sys.stderr.write(line)
        found.set()

    threading.Thread(target=pump, name="acp-rest-bridge-output", daemon=True).start()
    deadline = time.monotonic() + timeout
    found.wait(timeout)
    url = urls[0].replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:") if urls else ""
    handle = BridgeProcess(process, url, token, output)
    if not urls:
        handle.stop()
        raise SpawnError(f"the server did not start (exit status {process.returncode}):\n{''.join(output)}")
    with httpx.Client(timeout=2.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SpawnError(f"the server exited with status {process.returncode}:\n{''.join(output)}")
            try:
                if http.get(handle.base_url + "/v1/health").status_code == 200:
                    return handle
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # a readiness probe: the server answers health as soon as it can
    handle.stop()
    raise SpawnError(f"the server did not become healthy within {timeout} s:\n{''.join(output)}")
