"""Take a real agent's conversation through bridge restarts, and print a JSON report.

Runs as the first process of a loopback-only network namespace (``netns.py``), like ``legacy.py``,
whose agent configuration it reuses. With the fake LLM running and one data dir throughout:

1. a bridge starts; a session is created and told the first message; the turn ends;
2. the bridge is killed with SIGKILL; a new bridge starts on the same data dir (it must end the
   old run's agent processes) and the session gets a second message;
3. that bridge is stopped with SIGTERM; a third one starts, and the session gets a third message.

With ``--hide CAPABILITY`` (``sessionCapabilities.resume``) the agent runs under an agents-file id
(``<agent>-hidden``, the agent's profile) through ``hide_capability.py``, which hides that capability
from the bridge: with resume hidden, codex is continued with ``session/load`` and replays its history.

The report has, per stage, SessionInfo after the restart and the events of the turn, the agent
processes of the old bridge and which of them were still alive once the next one answered, the
whole log at the end and every model request (with the user messages it carried).

    python -m tests.realagents.restart --agent codex [--hide sessionCapabilities.resume] --out report.json
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.agents.install import installed_command
from tests.realagents.fake_llm import FakeLLMServer
from tests.realagents.legacy import AGENTS, install_dir, link_cache, wanted_version
from tests.realagents.netns import run_driver
from tests.support import Bridge, descendants, iter_sse, pid_alive, start_bridge, wait_until

HIDE = Path(__file__).resolve().parent / "hide_capability.py"

SESSION = "restart"
TURN_TIMEOUT = 90.0
ORPHAN_GRACE = 5.0  # the old run's agents must be gone this soon after the new bridge answers
# Each message names a word the later requests must still carry: the proof that the agent remembers.
MESSAGES = (
    "First message: remember the word PELICAN.",
    "Second message, after a crash of the bridge: remember the word HERON.",
    "Third message, after a stop of the bridge: which words did I ask you to remember?",
)


class Driver:
    def __init__(self, agent: str, root: Path, hide: str | None = None) -> None:
        self.agent = AGENTS[agent]
        self.agent_id = f"{agent}-hidden" if hide else agent
        self.hide = hide
        self.version = wanted_version(self.agent.id)
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        self.data = root / "data"
        self.report: dict[str, Any] = {"agent": self.agent_id, "stages": [], "timings": {}}

    def execute(self) -> dict[str, Any]:
        for d in (self.home, self.work):
            d.mkdir(parents=True, exist_ok=True)
        link_cache(self.data, self.agent.id, self.version)
        llm = FakeLLMServer(self.root / "llm.jsonl").start()
        bridge: Bridge | None = None
        started = time.monotonic()
        try:
            env = self.agent.env(self.home, llm.base_url)
            bridge = self._bridge(env)
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                body = {"agent": self.agent_id, "directory": str(self.work)}
                created = client.post(f"/v1/sessions/{SESSION}", json=body)
                self.report["create"] = {"status": created.status_code, "body": created.json()}
                if created.status_code != 200:
                    return self.report
                self._stage(client, "created", MESSAGES[0])
            for stop, message in (("kill", MESSAGES[1]), ("term", MESSAGES[2])):
                old = descendants(bridge.proc.pid)
                if stop == "kill":
                    bridge.proc.send_signal(signal.SIGKILL)
                    bridge.proc.wait(10)
                else:
                    bridge.stop()
                stopped = {"signal": stop, "returncode": bridge.proc.returncode, "agent_pids": old}
                self.report["bridge_log_tail"] = bridge.log()[-4000:]
                bridge = self._bridge(env)  # answers /v1/health when it returns
                wait_until(lambda: not any(pid_alive(pid) for pid in old), ORPHAN_GRACE)  # noqa: B023
                stopped["alive_after_restart"] = [pid for pid in old if pid_alive(pid)]
                with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                    self._stage(client, stop, message, stopped)
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                page = client.get(f"/v1/sessions/{SESSION}/events", params={"offset": 0, "limit": 100000})
                self.report["events"] = page.json()["events"]
                self.report["terminate_status"] = client.post(f"/v1/sessions/{SESSION}/terminate").status_code
            old = descendants(bridge.proc.pid)
            # Terminate stops the agent's process group; the bridge itself has no other children.
            wait_until(lambda: not any(pid_alive(pid) for pid in old), ORPHAN_GRACE)
            self.report["alive_after_terminate"] = [pid for pid in old if pid_alive(pid)]
        except Exception as exc:
            self.report["failure"] = f"{type(exc).__name__}: {exc}"
        finally:
            self.report["timings"]["total"] = round(time.monotonic() - started, 3)
            if bridge is not None:
                bridge.stop()
                self.report["bridge_log_tail"] = bridge.log()[-4000:]
            self.report["llm_requests"] = llm.log.entries
            llm.stop()
        return self.report

    def _bridge(self, env: dict[str, str]) -> Bridge:
        args = ["--agents-file", str(self._agents_file())] if self.hide else []
        return start_bridge(self.root, *args, env=env, data_dir=self.data, cwd=self.work)

    def _agents_file(self) -> Path:
        """The agent behind the capability-hiding proxy, as an agents-file agent with its profile."""
        path = self.root / "agents.toml"
        if not path.exists():
            folder = install_dir(self.agent.id, self.version)
            command = installed_command(folder, self.agent.id)
            if command is None:
                raise RuntimeError(f"{self.agent.id} is not installed in {folder}")
            argv = [sys.executable, str(HIDE), str(self.hide), "--", *command]
            lines = [f"[agents.{json.dumps(self.agent_id)}]", f"command = {json.dumps(argv)}"]
            lines.append(f"profile = {json.dumps(self.agent.id)}")
            path.write_text("\n".join(lines) + "\n")
        return path

    def _stage(self, client: httpx.Client, name: str, message: str, stopped: dict[str, Any] | None = None) -> None:
        stage: dict[str, Any] = {"name": name, **({"stopped": stopped} if stopped else {})}
        self.report["stages"].append(stage)
        stage["info_before"] = self._info(client)
        offset = len(client.get(f"/v1/sessions/{SESSION}/events", params={"offset": 0}).json()["events"])
        started = time.monotonic()
        sent = client.post(f"/v1/sessions/{SESSION}/messages", json={"message": message})
        stage["send"] = {"status": sent.status_code, "body": sent.text[-2000:]}
        if sent.status_code != 204:
            raise RuntimeError(f"message refused: {sent.status_code} {sent.text[-500:]}")
        stage["events"] = self._turn(client, offset)
        self.report["timings"][name] = round(time.monotonic() - started, 3)
        stage["info_after"] = self._info(client)

    def _info(self, client: httpx.Client) -> dict[str, Any] | None:
        sessions = client.get("/v1/sessions").json()["sessions"]
        return next((s for s in sessions if s["sessionId"] == SESSION), None)

    def _turn(self, client: httpx.Client, offset: int) -> list[dict[str, Any]]:
        """The events from ``offset`` until the turn ends (SSE)."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + TURN_TIMEOUT
        url = f"/v1/sessions/{SESSION}/events/sse"
        with client.stream("GET", url, params={"offset": offset}, timeout=httpx.Timeout(TURN_TIMEOUT)) as response:
            for event in iter_sse(response, deadline):
                seen.append(event)
                if event["type"] in ("turn.ended", "session.ended"):
                    return seen
        raise RuntimeError(f"the turn did not end in {TURN_TIMEOUT} s: {[e['type'] for e in seen]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, choices=sorted(AGENTS))
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--hide", help="hide this agent capability from the bridge (dotted key)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args(argv)

    def execute(root: Path) -> dict[str, Any]:
        report = Driver(args.agent, root, args.hide).execute()
        report["root"] = str(root)
        return report

    run_driver(f"acp-restart-{args.agent}-", execute, args.out, keep=args.keep)


if __name__ == "__main__":
    main()
