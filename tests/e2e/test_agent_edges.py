"""What an agent sends cannot hurt the bridge: an endless stdout line is cut and reported while the
session goes on, with memory bounded; agent start, end and stop are logged."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import PROBES, Bridge, create_session, send, start_bridge, until_type, wait_for_events, wait_until

MIB = 1024 * 1024


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    tmp = tmp_path_factory.mktemp("huge")
    agents = tmp / "agents.toml"
    probe = PROBES / "probe_agent.py"
    agents.write_text(
        f'[agents.huge]\ncommand = ["{sys.executable}", "{probe}"]\n'
        f'env = {{ PROBE_MODE = "huge_line", PROBE_HUGE_BYTES = "{100 * MIB}" }}\n'
    )
    server = start_bridge(tmp, "--agents-file", str(agents), "--log-level", "info")
    yield server
    server.stop()


def test_over_long_line_is_cut_and_the_session_goes_on(huge: Bridge) -> None:
    client = huge.client(timeout=60)
    create_session(client, "huge-1", agent="huge")
    before = rss_kib(huge.proc.pid)
    send(client, "huge-1", "hi")
    found = wait_for_events(client, "huge-1", until_type("turn.ended"), timeout=60)
    grown_mib = (rss_kib(huge.proc.pid) - before) / 1024
    unparsed = [e for e in found if e["type"] == "agent.unparsed"]
    assert unparsed and "over the limit" in unparsed[0]["data"]["error"], found
    assert str(100 * MIB) in unparsed[0]["data"]["error"] or "bytes" in unparsed[0]["data"]["error"]
    texts = str([e["data"] for e in found if e["type"].startswith("item.")])
    assert "probe: hi" in texts  # the reply after the cut line arrived whole
    assert grown_mib < 40, grown_mib  # a 100 MiB line was never held whole
    # The session still takes messages.
    send(client, "huge-1", "again")
    wait_for_events(client, "huge-1", until_type("turn.ended", 2), timeout=60)


def test_agent_lifecycle_is_logged(huge: Bridge) -> None:
    client = huge.client()
    create_session(client, "log-1", agent="huge")
    assert client.post("/v1/sessions/log-1/terminate").status_code == 204
    assert wait_until(lambda: "ended" in huge.log() and "stopping agent" in huge.log(), 10), huge.log()[-3000:]
    log = huge.log()
    assert "agent started: pid" in log and "probe_agent.py" in log
    assert "stopping agent pid" in log and "agent pid" in log
