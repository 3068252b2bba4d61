"""A real PostgreSQL server for the tests: a cluster made in a temp dir with Debian's ``postgresql``
binaries, listening on 127.0.0.1 (a free port), trust authentication, stopped at the end.

PostgreSQL refuses to run as root: as root the cluster belongs to the ``postgres`` user (made by the
Debian package) and its commands run through ``runuser``. Missing binaries are installed with
apt-get when the tests run as root and can; otherwise the tests that need the server fail with the
reason, unless ``ACP_BRIDGE_TEST_POSTGRES=0`` opts out (then they skip).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support import free_port
from tests.tiers import real_part

OPT_OUT = "ACP_BRIDGE_TEST_POSTGRES"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


def _install() -> str | None:
    """apt-get install postgresql (as root); None when done, else why not."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "PostgreSQL is not installed (apt-get install postgresql)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"cannot install PostgreSQL: {' '.join(argv)} failed: {done.stderr[-2000:]}"
    return None


@real_part("postgres")
def require_binaries() -> Path:
    """The directory of initdb and pg_ctl; installs them when it can, else fails (or skips when opted out)."""
    import pytest

    if os.environ.get(OPT_OUT) == "0":
        pytest.skip(f"PostgreSQL tests opted out with {OPT_OUT}=0")
    found = _bin_dir()
    if found is None:
        why = _install()
        found = _bin_dir()
        if found is None:
            pytest.fail(f"{why or 'PostgreSQL binaries not found'} (or set {OPT_OUT}=0)")
    return found


@dataclass
class PostgresServer:
    bin_dir: Path
    directory: Path
    port: int
    user: str | None  # the system user running it (None: this process's)
    durable: bool = False  # fsync on (benchmarks); off for the tests
    # Addresses it listens on: loopback, and for the fleet's test hosts (tests/hosts.py) theirs.
    listen: tuple[str, ...] = ("127.0.0.1",)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses={','.join(self.listen)} -c unix_socket_directories={self.directory}"
            " -c max_connections=200"
        )
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        done = self._run(
            "pg_ctl",
            "-D",
            str(self.directory / "data"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "-l",
            str(self.directory / "server.log"),
            "start",
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}\n{self.log()}")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", mode, "-w", "-t", "60", "stop")

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def new_database(self) -> str:
        """A fresh empty database on this server; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


@real_part("postgres")
def start_postgres(durable: bool = False, listen: tuple[str, ...] = ("127.0.0.1",)) -> PostgresServer:
    bin_dir = require_binaries()
    user = "postgres" if os.geteuid() == 0 else None
    # Not under pytest's tmp dirs: those are private to root, and the server runs as postgres.
    directory = Path(tempfile.mkdtemp(prefix="acp-bridge-pg-"))
    if user is not None:
        shutil.chown(directory, user)
    server = PostgresServer(bin_dir, directory, free_port(), user, durable, listen)
    done = server._run(
        "initdb",
        "-D",
        str(directory / "data"),
        "-A",
        "trust",
        "-U",
        "postgres",
        "-E",
        "UTF8",
        "--no-sync",
        "--locale=C.UTF-8",
    )
    if done.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
    if listen != ("127.0.0.1",):  # clients on the networks of those addresses, too
        with open(directory / "data" / "pg_hba.conf", "a") as hba:
            hba.write("host all all samenet trust\n")
    deadline = time.monotonic() + 60
    while True:
        try:
            server.start()
            return server
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            server.port = free_port()  # (taken meanwhile)


def remove_postgres(server: PostgresServer) -> None:
    server.stop("immediate")
    shutil.rmtree(server.directory, ignore_errors=True)
