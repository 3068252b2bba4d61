"""Run a command inside a fresh network namespace that has only loopback, so nothing can leave.

``unshare -n`` (root) or ``unshare -rn`` (anyone, where user namespaces are allowed) gives a new
network namespace; this module, run as the namespace's first process, brings ``lo`` up with an
ioctl (no iproute2 needed) and then execs the real command::

    unshare -n python -m tests.realagents.netns -- python -m tests.realagents.driver ...

``isolation()`` says whether this works here (cached), and why not when it does not, so tests
can skip with the reason.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from tests.realagents.agents import scrubbed_environ
from tests.tiers import real_part

ROOT = Path(__file__).resolve().parents[2]

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sh22x"  # struct ifreq: name, flags, padding to 40 bytes

# An address outside the machine: inside the namespace, connecting must fail at once.
_OUTSIDE = ("192.0.2.1", 9)  # TEST-NET-1, never routed


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def check_isolated() -> str | None:
    """None when loopback works and the outside is unreachable; else what is wrong."""
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            with socket.create_connection(server.getsockname(), timeout=2):
                pass
    except OSError as exc:
        return f"loopback does not work in the namespace: {exc}"
    with socket.socket() as probe:
        probe.settimeout(2)
        try:
            probe.connect(_OUTSIDE)
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL):
                return None
            return f"the namespace is not loopback-only: connecting outside gave {exc}"
    return "the namespace is not loopback-only: an outside address answered"


@dataclass(frozen=True, slots=True)
class Isolation:
    prefix: tuple[str, ...] | None  # argv prefix that runs a command isolated, None when impossible
    reason: str  # how (when possible) or why not

    @property
    def available(self) -> bool:
        return self.prefix is not None


def _wrapper(python: str) -> list[str]:
    return [python, "-m", "tests.realagents.netns", "--"]


@real_part("realagents")
@functools.cache
def isolation(python: str = sys.executable) -> Isolation:
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation(None, "unshare (util-linux) is not installed")
    attempts = [[unshare, "-n"], [unshare, "-rn"]] if os.geteuid() == 0 else [[unshare, "-rn"]]
    problems = []
    for attempt in attempts:
        argv = [*attempt, python, "-m", "tests.realagents.netns", "--check"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT, env=_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{' '.join(attempt)}: {exc}")
            continue
        if done.returncode == 0:
            return Isolation((*attempt, *_wrapper(python)), " ".join(attempt))
        problems.append(f"{' '.join(attempt)}: {(done.stderr or done.stdout).strip()[-300:]}")
    return Isolation(None, "no loopback-only network namespace: " + "; ".join(problems))


OPT_OUT = "ACP_BRIDGE_TEST_REAL_AGENTS"


def unavailable(reason: str) -> NoReturn:
    """A real-agent test cannot run its real part: it fails in CI (``CI`` set), else it is skipped.
    ``ACP_BRIDGE_TEST_REAL_AGENTS=0`` skips such tests everywhere."""
    import pytest

    if os.environ.get(OPT_OUT, "1") == "0":
        pytest.skip(f"real agents disabled ({OPT_OUT}=0; unset it to run them)")
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"real agents cannot run here: {reason} (set {OPT_OUT}=0 to leave them out)", pytrace=False)
    print(f"skipped: {reason}", file=sys.stderr)
    pytest.skip(f"{reason} (outside CI a real-agent test that cannot run is skipped: fix that to run it)")


def opted_out() -> None:
    if os.environ.get(OPT_OUT, "1") == "0":
        unavailable("opted out")


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_isolated(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a new loopback-only namespace; raises RuntimeError when impossible."""
    iso = isolation()
    if iso.prefix is None:
        raise RuntimeError(iso.reason)
    return subprocess.run([*iso.prefix, *argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=_env(env))


def write_report(report: dict[str, Any], out: Path | None) -> None:
    """A driver's JSON report, to ``out`` or standard output, where the test reads it back."""
    text = json.dumps(report, indent=1)
    if out:
        out.write_text(text)
    else:
        sys.stdout.write(text + "\n")


def run_driver(
    prefix: str, execute: Callable[[Path], dict[str, Any]], out: Path | None, *, keep: bool, root: Path | None = None
) -> None:
    """A driver's run: the environment scrubbed of real keys and endpoints (the bridge and the agent
    inherit it), a work dir (``root``, kept; else a fresh temp dir, removed unless ``keep``), the
    report written."""
    kept = scrubbed_environ()
    os.environ.clear()
    os.environ.update(kept)
    work = root or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        report = execute(work.resolve())
    finally:
        if not (root or keep):
            shutil.rmtree(work, ignore_errors=True)
    write_report(report, out)


def driver_report(argv: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """Run a driver in the namespace (``run_isolated``) and read its report, which must say no failure."""
    done = run_isolated(argv, timeout=timeout)
    assert done.returncode == 0 and out.exists(), f"driver failed ({done.returncode}):\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(out.read_text())
    assert "failure" not in report, f"{report['failure']}\nbridge log:\n{report.get('bridge_log_tail')}"
    return report


def main(argv: list[str]) -> None:
    if argv not in (["--check"],) and argv[:1] != ["--"]:
        sys.exit("usage: python -m tests.realagents.netns --check | -- COMMAND...")
    try:
        loopback_up()
    except OSError as exc:
        sys.exit(f"cannot bring loopback up: {exc}")
    if argv == ["--check"]:
        problem = check_isolated()
        sys.exit(problem)  # None: exit status 0
    command = argv[1:]
    if not command:
        sys.exit("no command given")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
