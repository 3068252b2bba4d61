"""An agent taken from the ACP registry's snapshot, installed and driven through a session, with no
agents file: ``claude-code-acp`` (an ``npx`` distribution) against the fake LLM, offline, in a
loopback-only network namespace (``tests/realagents/registry_agent.py``). Fails in CI when npm, the
npm registry or network namespaces are missing; skips elsewhere with the reason, and with
``ACP_BRIDGE_TEST_REAL_AGENTS=0``."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from app.agents.acp_catalog import load_snapshot
from tests.realagents import fake_llm
from tests.realagents.diffcheck import check_events
from tests.realagents.legacy import install_dir, install_outside
from tests.realagents.netns import driver_report, isolation, opted_out, unavailable
from tests.realagents.registry_agent import AGENT, catalog_version

DRIVER_TIMEOUT = 300.0

# Real agents from npm in a loopback-only network namespace (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("netns", "npm")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    opted_out()
    iso = isolation()
    if not iso.available:
        unavailable(iso.reason)
    if shutil.which("npm") is None or shutil.which("node") is None:
        unavailable(f"npm/node are not installed: {AGENT} is an npm package")
    # POST /v1/agents/claude-code-acp/install, npm from the registry
    installed = install_outside(AGENT, catalog_version())
    if installed["status"] != 204:
        unavailable(f"{AGENT} could not be installed: {installed['body'][-1500:]}")
    out = tmp_path_factory.mktemp("registry-agent") / "report.json"
    argv = [sys.executable, "-m", "tests.realagents.registry_agent", "--out", str(out)]
    result = driver_report(argv, out, DRIVER_TIMEOUT)
    print(json.dumps({k: result.get(k) for k in ("install", "agent_info", "catalog", "timings")}, indent=1))
    return result


def of_type(report: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [e for e in report["events"] if e["type"] == event_type]


def test_the_agent_comes_from_the_snapshot_and_installs_through_the_api(report: dict[str, Any]) -> None:
    entry = load_snapshot().get(AGENT)
    assert entry is not None and entry.npx is not None
    assert report["agents_file"] is False
    assert report["install"]["status"] == 204, report["install"]
    info = report["agent_info"]
    assert info["installed"] is True
    assert info["_meta"]["sandbox-agent/acpRegistry"]["distribution"] == "npx"
    assert info["path"].endswith(f"/acp-registry/{AGENT}/node_modules/.bin/claude-code-acp")
    assert report["catalog"]["source"] == "snapshot" and report["catalog"]["date"]


def test_the_session_works_against_the_fake_llm(report: dict[str, Any]) -> None:
    assert report["create"]["status"] == 200, report["create"]
    assert report["file"] == fake_llm.EDITED_TEXT  # written, then edited, by the agent
    assert [r["reply"] for r in report["llm_requests"] if r["tools"]][-1] == "final"
    ended = of_type(report, "turn.ended")
    assert len(ended) == 1 and ended[0]["data"]["metadata"]["stopReason"] == "end_turn"
    assert of_type(report, "permission.requested"), "the agent asks before it writes"
    assert all(a["status"] == 204 for a in report["permissions_answered"])
    assert of_type(report, "agent.unparsed") == [] and of_type(report, "error") == []
    assert report["terminate_status"] == 204
    # Nothing of the agent's tree is left (the bridge itself carries the marker too).
    assert set(report["leftover_pids"]) <= {report["bridge_pid"]}
    assert set(report["pids_before_terminate"]) - {report["bridge_pid"]}, "the agent ran"
    assert report["bridge_children_after_terminate"] == []


def test_every_diff_applies_to_the_file_as_it_was(report: dict[str, Any]) -> None:
    work = Path(report["root"]) / "work"
    check = check_events(report["events"], {str(work / fake_llm.FILE_NAME): report["file"]})
    assert check.ok and check.diffs >= 2 and check.missing == 0, (check.summary(), check.problems)


def test_the_install_is_kept_where_the_catalog_says(report: dict[str, Any]) -> None:
    kept = install_dir(AGENT, catalog_version()) / "acp-registry" / AGENT
    manifest = json.loads((kept / ".acp-registry.json").read_text())
    assert manifest["distribution"] == "npx" and manifest["package"].startswith("@zed-industries/claude-code-acp@")
