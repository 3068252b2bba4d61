"""The docs' way to give the database password, on a real PostgreSQL server that asks for it: the URL
names no password (`ACP_BRIDGE_DATABASE_URL=postgresql://user@host/db`, or `--database-url` with it)
and libpq reads it from `PGPASSFILE` (or `~/.pgpass`, or `PGPASSWORD`), so it is never in the bridge's
command line (`ps`); without it the bridge does not start, saying why in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.postgres import PostgresServer
from tests.support import ROOT, create_session, start_bridge

pytestmark = pytest.mark.postgres
PASSWORD = "pw-" + "s3cret-of-the-fleet"


def test_readme_recipes_keep_the_password_out_of_the_command_line() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        for line in page.read_text().splitlines():
            if "--database-url" in line or "ACP_BRIDGE_DATABASE_URL" in line:
                assert not re.search(r"postgres(ql)?://[^/\s:@`]+:[^@\s`]+@", line), f"{page.name}: {line}"
    assert "PGPASSFILE" in (ROOT / "docs" / "fleets.md").read_text()


def test_the_password_comes_from_a_pgpass_file(tmp_path: Path, postgres: PostgresServer, database_url: str) -> None:
    database = database_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE fleet LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO fleet')
        hba = postgres.directory / "data" / "pg_hba.conf"
        hba.write_text(f"host {database} fleet 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        conn.execute("SELECT pg_reload_conf()")
    url = f"postgresql://fleet@127.0.0.1:{postgres.port}/{database}"
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{postgres.port}:{database}:fleet:{PASSWORD}\n")
    passfile.chmod(0o600)

    # Without the password: no start, one line that says why (and names no password).
    done = subprocess.run(
        [sys.executable, "-m", "app", "server", "--port", "0", "--data-dir", str(tmp_path / "d0")],
        env={"ACP_BRIDGE_DATABASE_URL": url, "PGPASSFILE": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode != 0 and "cannot use the database" in done.stderr and "password" in done.stderr

    server = start_bridge(tmp_path, env={"ACP_BRIDGE_DATABASE_URL": url, "PGPASSFILE": str(passfile)})
    try:
        create_session(server.client(), "with-a-password")
        command_line = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert PASSWORD.encode() not in command_line and b"postgresql://" not in command_line
        assert PASSWORD not in server.log()
    finally:
        server.stop()
