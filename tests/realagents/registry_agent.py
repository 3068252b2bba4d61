"""Drive an agent of the ACP registry's catalog through the bridge, with no agents file.

The agent is ``claude-code-acp`` of the snapshot shipped with the package: an ``npx`` distribution
(``@zed-industries/claude-code-acp``), a plain npm ACP agent that takes its Anthropic base URL and
key from the environment, so it talks to the fake LLM. ``install_outside`` installs it with
``POST /v1/agents/claude-code-acp/install`` on a bridge outside the namespace (npm needs the
registry) into the kept install dir; inside the loopback-only namespace the driver starts the fake
LLM and a bridge on that install dir with the agent's variables in its environment, installs again
(already there: 204), creates a session on the registry id, sends the scripted steps, answers the
permissions, terminates, and reports.

    python -m tests.realagents.netns -- python -m tests.realagents.registry_agent --out report.json
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx

from app.agents.acp_catalog import load_snapshot
from tests.realagents.agents import RECIPES
from tests.realagents.driver import MARKER_VAR, Run
from tests.realagents.fake_llm import FakeLLMServer
from tests.realagents.legacy import install_dir
from tests.realagents.netns import run_driver
from tests.support import Bridge, start_bridge

AGENT = "claude-code-acp"
META = "sandbox-agent/acpRegistry"


def catalog_version() -> str:
    """The version of the agent the snapshot's catalog names (the one an install takes)."""
    return str(recipe().version)


def recipe() -> Any:
    """claude-code-acp's offline environment (``claude_env``) under the registry's id and package."""
    entry = load_snapshot().get(AGENT)
    assert entry is not None and entry.npx is not None, f"{AGENT} is not an npx agent of the snapshot"
    package, _, version = entry.npx.package.rpartition("@")
    return dataclasses.replace(
        RECIPES["claude-code"], name=AGENT, package=package, version=version, profile=None, disabled_services=()
    )


class RegistryRun(Run):
    def __init__(self, root: Path) -> None:
        steps = ",".join(RECIPES["claude-code"].steps)
        prompt = f"[scenario:{steps} dir={root / 'work'}] Follow the scripted steps."
        super().__init__(recipe(), [], root, [prompt], slow_end=False)
        self.data = root / "data"

    def execute(self) -> dict[str, Any]:
        for d in (self.home, self.work, self.transcripts, self.data):
            d.mkdir(parents=True, exist_ok=True)
        shared_bin = install_dir(AGENT, catalog_version())
        shared_bin.mkdir(parents=True, exist_ok=True)
        (self.data / "bin").symlink_to(shared_bin, target_is_directory=True)
        llm = FakeLLMServer(self.root / "llm.jsonl").start()
        bridge: Bridge | None = None
        try:
            # No agents file: the agent comes from the catalog and reads its variables from the
            # server's environment, as it would from a shell.
            env = {
                **self.recipe.env(self.home, llm.base_url),
                MARKER_VAR: self.marker,
                "ACP_BRIDGE_TRANSCRIPT_DIR": str(self.transcripts),
                "ACP_BRIDGE_INSTALL_TIMEOUT": "300",
            }
            bridge = start_bridge(self.root, env=env, data_dir=self.data, cwd=self.work)
            # The marker is in the server's environment (the agent inherits it): the server has it too.
            self.report["bridge_pid"] = bridge.proc.pid
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                started = time.monotonic()
                installed = client.post(f"/v1/agents/{AGENT}/install", json={})
                self._timed("install", started)
                self.report["install"] = {"status": installed.status_code, "body": installed.text[-2000:]}
                listing = client.get("/v1/agents").json()
                self.report["catalog"] = listing.get("_meta", {}).get(META)
                self.report["agent_info"] = next((a for a in listing["agents"] if a["id"] == AGENT), None)
                self._session(client, bridge)
        except Exception as exc:
            self.report["failure"] = f"{type(exc).__name__}: {exc}"
        finally:
            if bridge is not None:
                bridge.stop()
                self.report["bridge_log_tail"] = bridge.log()[-3000:]
            llm.stop()
        self.report["agents_file"] = any(self.root.glob("*.toml"))
        self.report["llm_requests"] = llm.log.entries
        self._collect_transcript()
        path = self.work / "hello.txt"
        self.report["file"] = path.read_text() if path.exists() else None
        return self.report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args(argv)
    run_driver("acp-registry-agent-", lambda root: RegistryRun(root).execute(), args.out, keep=args.keep)


if __name__ == "__main__":
    main()
