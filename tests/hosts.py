"""Separate hosts on this machine for the fleet tests: network namespaces on one switch.

Each host is a network namespace with its own address (``198.18.N.k``, the range set aside for
benchmarking networks: never a real destination) on a Linux bridge that lives in a namespace of
its own (``<prefix>-sw``), so traffic between hosts never passes this machine's firewall. The
test's own namespace joins the switch as ``198.18.N.1``: the tests reach every host, and the hosts
reach a PostgreSQL server that listens there too. A process started on a host (``wrapper``) also
gets a mount namespace of its own, in which directories can be bind-mounted: the same path names
another disk on each host, as on separate machines::

    ip netns exec <host> python -m tests.hosts --bind SRC DST -- COMMAND...

Needs root and iproute2 (``ip``, installed with apt-get when missing); ``unavailable()`` says why
not. ``ACP_BRIDGE_TEST_HOSTS=0`` opts out (the tests then skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.tiers import real_part

OPT_OUT = "ACP_BRIDGE_TEST_HOSTS"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    """Why hosts cannot be made here, or None. A missing iproute2 is installed (root, apt-get)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None and shutil.which("apt-get") is not None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "iproute2"]):
            subprocess.run(argv, env=env, capture_output=True, timeout=900)
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


@real_part("namespaces")
def require() -> None:
    """Fail with the reason when hosts cannot be made (skip when opted out)."""
    import pytest

    if os.environ.get(OPT_OUT) == "0":
        pytest.skip(f"tests on separate hosts opted out with {OPT_OUT}=0")
    why = unavailable()
    if why is not None:
        pytest.fail(f"separate hosts cannot be made: {why} (or set {OPT_OUT}=0)")


@dataclass
class Host:
    name: str  # its namespace
    address: str


@dataclass
class Hosts:
    """A switch and the hosts on it; ``close`` removes them all."""

    prefix: str
    subnet: int
    hosts: list[Host] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    @property
    def gateway(self) -> str:
        """This process's address on the switch."""
        return f"198.18.{self.subnet}.1"

    @classmethod
    def create(cls) -> Hosts:
        prefix = f"acpf{os.getpid() % 100000}"
        made = cls(prefix, 1 + os.getpid() % 250)
        try:
            _ip("netns", "add", made.switch)
            _ip("-n", made.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", made.switch, "link", "set", "br0", "up")
            _ip("link", "add", f"{prefix}-r", "type", "veth", "peer", "name", "up0", "netns", made.switch)
            _ip("-n", made.switch, "link", "set", "up0", "master", "br0", "up")
            _ip("addr", "add", f"{made.gateway}/24", "dev", f"{prefix}-r")
            _ip("link", "set", f"{prefix}-r", "up")
        except BaseException:
            made.close()
            raise
        return made

    def add(self, name: str) -> Host:
        index = len(self.hosts) + 2
        host = Host(f"{self.prefix}-{name}", f"198.18.{self.subnet}.{index}")
        self.hosts.append(host)
        _ip("netns", "add", host.name)
        _ip("-n", host.name, "link", "add", "eth0", "type", "veth", "peer", "name", f"h{index}", "netns", self.switch)
        _ip("-n", self.switch, "link", "set", f"h{index}", "master", "br0", "up")
        _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.name, "link", "set", "eth0", "up")
        _ip("-n", host.name, "link", "set", "lo", "up")
        return host

    def wrapper(self, host: Host, binds: dict[Path, Path] | None = None) -> list[str]:
        """The argv prefix that runs a command on ``host``, with ``binds`` (source -> mount point)."""
        argv = ["ip", "netns", "exec", host.name, sys.executable, "-m", "tests.hosts"]
        for source, target in (binds or {}).items():
            argv += ["--bind", str(source), str(target)]
        return [*argv, "--"]

    def close(self) -> None:
        for host in self.hosts:
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.switch], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", f"{self.prefix}-r"], capture_output=True, timeout=30)


def main(argv: list[str]) -> None:
    """Inside a host: bind-mount the given directories (in the mount namespace ``ip netns exec``
    made for this process), then run the command."""
    binds = []
    while argv and argv[0] == "--bind":
        binds.append((argv[1], argv[2]))
        argv = argv[3:]
    if argv[:1] != ["--"] or len(argv) < 2:
        sys.exit("usage: python -m tests.hosts [--bind SRC DST]... -- COMMAND...")
    for source, target in binds:
        done = subprocess.run(["mount", "--bind", source, target], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"mount --bind {source} {target}: {done.stderr.strip()}")
    os.chdir(os.getcwd())  # a working directory under a mount point: into what is mounted there now
    os.execvp(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
