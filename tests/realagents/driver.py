"""Drive one real ACP agent through the bridge, end to end, and print a JSON report.

Meant to run as the first process of a loopback-only network namespace (see ``netns.py``): it
starts the fake LLM and a real bridge server, both on 127.0.0.1, registers the npm-installed agent
in an agents file, and then talks to the bridge only through its legacy REST/SSE API:

1. create a session (cwd = a fresh work dir),
2. send each prompt; answer every ``permission.requested`` through
   ``POST /v1/sessions/{id}/permissions/{pid}/reply`` when the bridge serves it (otherwise the
   session is started in the agent's no-ask mode),
3. wait for ``turn.ended``; optionally start a slow turn and terminate during it,
4. terminate and check that no process of the agent's tree is left.

The bridge records the session's wire transcript (``ACP_BRIDGE_TRANSCRIPT_DIR``); the report says
which ACP client services the agent used, so a reader knows which path was exercised.

    python -m tests.realagents.driver --agent claude-code --agent-command /path/to/claude-code-acp
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.realagents.agents import RECIPES, AgentRecipe
from tests.realagents.fake_llm import FakeLLMServer
from tests.realagents.netns import run_driver
from tests.support import Bridge, descendants, iter_sse, start_bridge, wait_until

REPLY_PATH = "/v1/sessions/{session_id}/permissions/{permission_id}/reply"
TURN_TIMEOUT = 90.0
MARKER_VAR = "ACP_BRIDGE_TEST_AGENT_MARKER"


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def write_agents_file(path: Path, recipe: AgentRecipe, command: list[str], env: dict[str, str]) -> None:
    lines = [
        f"[agents.{toml_string(recipe.name)}]",
        "command = [" + ", ".join(toml_string(a) for a in command) + "]",
        "env = { " + ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in env.items()) + " }",
        "disabled_services = [" + ", ".join(toml_string(m) for m in recipe.disabled_services) + "]",
    ]
    if recipe.profile:
        lines.append(f"profile = {toml_string(recipe.profile)}")
    path.write_text("\n".join(lines) + "\n")


def marked_pids(marker: str) -> list[int]:
    """Every live process whose environment carries the marker: the agent and all it spawned."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


class Run:
    def __init__(
        self,
        recipe: AgentRecipe,
        command: list[str],
        root: Path,
        prompts: list[str],
        slow_end: bool,
        extra: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.recipe = recipe
        self.extra = extra or {}
        self.command = command
        self.root = root
        self.prompts = prompts
        self.slow_end = slow_end
        self.home = root / "home"
        self.work = root / "work"
        self.transcripts = root / "transcripts"
        self.session_id = f"real-{recipe.name}"
        self.marker = uuid.uuid4().hex
        self.report: dict[str, Any] = {"agent": recipe.name, "package": recipe.spec, "root": str(root)}
        self.timings: dict[str, float] = {}
        self.report["timings"] = self.timings

    def _timed(self, name: str, started: float) -> None:
        self.timings[name] = round(time.monotonic() - started, 3)

    def execute(self) -> dict[str, Any]:
        for d in (self.home, self.work, self.transcripts):
            d.mkdir(parents=True, exist_ok=True)
        llm = FakeLLMServer(self.root / "llm.jsonl").start()
        bridge: Bridge | None = None
        try:
            if self.recipe.prepare_home:
                self.recipe.prepare_home(self.home)
            env = {**self.recipe.env(self.home, llm.base_url), MARKER_VAR: self.marker}
            agents_file = self.root / "agents.toml"
            write_agents_file(agents_file, self.recipe, self.command, env)
            started = time.monotonic()
            bridge_env = {"ACP_BRIDGE_TRANSCRIPT_DIR": str(self.transcripts)}
            bridge = start_bridge(self.root, "--agents-file", str(agents_file), env=bridge_env, cwd=self.work)
            self._timed("bridge_start", started)
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                self._session(client, bridge)
                for name, body in self.extra.items():
                    self.report.setdefault("extra", {})[name] = self._extra_session(client, llm, name, body)
        except Exception as exc:
            self.report["failure"] = f"{type(exc).__name__}: {exc}"
        finally:
            if bridge is not None:
                bridge.stop()
                self.report["bridge_log_tail"] = bridge.log()[-3000:]
            llm.stop()
        self.report["llm_requests"] = llm.log.entries
        self._collect_transcript()
        path = self.work / "hello.txt"
        self.report["file"] = path.read_text() if path.exists() else None
        return self.report

    def _session(self, client: httpx.Client, bridge: Bridge) -> None:
        paths = client.get("/openapi.json").json().get("paths", {})
        can_reply = REPLY_PATH in paths
        self.report["permission_path"] = "reply" if can_reply else "agent-mode"
        body: dict[str, Any] = {"agent": self.recipe.name, "directory": str(self.work)}
        if not can_reply and self.recipe.no_ask_mode:
            body["agentMode"] = self.recipe.no_ask_mode
        started = time.monotonic()
        created = client.post(f"/v1/sessions/{self.session_id}", json=body)
        self._timed("create", started)
        self.report["create"] = {"status": created.status_code, "body": created.json()}
        if created.status_code != 200:
            return
        self.report["agent_pids"] = marked_pids(self.marker)
        answered: list[dict[str, Any]] = []
        offset = 0
        for number, prompt in enumerate(self.prompts, start=1):
            started = time.monotonic()
            sent = client.post(f"/v1/sessions/{self.session_id}/messages", json={"message": prompt})
            if sent.status_code != 204:
                self.report.setdefault("send_failures", []).append({"status": sent.status_code, "body": sent.text})
                break
            offset = self._follow(client, offset, answered, until="turn.ended")
            self._timed(f"prompt_{number}", started)
        if self.slow_end:
            # A turn that is still streaming when the session is terminated: session/cancel on the wire.
            client.post(f"/v1/sessions/{self.session_id}/messages", json={"message": "[scenario:slow] Take your time."})
            offset = self._follow(client, offset, answered, until="item.delta")
        self.report["permissions_answered"] = answered
        pids_before = sorted(set(marked_pids(self.marker)))
        started = time.monotonic()
        terminated = client.post(f"/v1/sessions/{self.session_id}/terminate")
        self._timed("terminate", started)
        self.report["terminate_status"] = terminated.status_code
        wait_until(lambda: not marked_pids(self.marker), timeout=10)
        self.report["pids_before_terminate"] = pids_before
        self.report["leftover_pids"] = marked_pids(self.marker)
        self.report["bridge_children_after_terminate"] = descendants(bridge.proc.pid)
        page = client.get(f"/v1/sessions/{self.session_id}/events", params={"offset": 0, "limit": 100000})
        self.report["events"] = page.json().get("events", [])

    def _extra_session(
        self, client: httpx.Client, llm: FakeLLMServer, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """One more session, created with ``body``'s fields (a model, a permission mode), that writes
        and edits the file; every permission is rejected, so the file is there only if nothing asked."""
        work = self.work / name
        work.mkdir(parents=True, exist_ok=True)
        session_id = f"{self.session_id}-{name}"
        first = len(llm.log.entries)
        created = client.post(
            f"/v1/sessions/{session_id}", json={"agent": self.recipe.name, "directory": str(work), **body}
        )
        result: dict[str, Any] = {"create": {"status": created.status_code, "body": created.json()}}
        if created.status_code != 200:
            return result
        prompt = f"[scenario:write,edit,shell dir={work}] Follow the scripted steps."
        answered: list[dict[str, Any]] = []
        if client.post(f"/v1/sessions/{session_id}/messages", json={"message": prompt}).status_code == 204:
            self._follow(client, 0, answered, until="turn.ended", session_id=session_id, reply="reject")
        sessions = client.get("/v1/sessions").json()["sessions"]
        result["info"] = next((s for s in sessions if s["sessionId"] == session_id), None)
        result["terminate_status"] = client.post(f"/v1/sessions/{session_id}/terminate").status_code
        page = client.get(f"/v1/sessions/{session_id}/events", params={"offset": 0, "limit": 100000})
        result["events"] = page.json().get("events", [])
        result["permissions_answered"] = answered
        result["llm_requests"] = llm.log.entries[first:]
        path = work / "hello.txt"
        result["file"] = path.read_text() if path.exists() else None
        sent = []
        transcript = self.transcripts / f"{session_id}.jsonl"
        for line in transcript.read_text().splitlines() if transcript.exists() else []:
            record = json.loads(line)
            if record["dir"] == "client->agent" and str(record["msg"].get("method", "")).startswith("session/set_"):
                sent.append([record["msg"]["method"], record["msg"].get("params")])
        result["settings_sent"] = sent
        return result

    def _follow(
        self,
        client: httpx.Client,
        offset: int,
        answered: list[dict[str, Any]],
        until: str,
        session_id: str | None = None,
        reply: str = "once",
    ) -> int:
        """Read SSE from ``offset`` until an ``until`` event (or the session's end); answer permissions."""
        session_id = session_id or self.session_id
        deadline = time.monotonic() + TURN_TIMEOUT
        url = f"/v1/sessions/{session_id}/events/sse"
        with client.stream("GET", url, params={"offset": offset}, timeout=httpx.Timeout(TURN_TIMEOUT)) as response:
            for event in iter_sse(response):
                offset = max(offset, int(event["sequence"]))
                kind = event["type"]
                if kind == "permission.requested":
                    answered.append(self._answer(client, event["data"], session_id, reply))
                if kind == until or kind == "session.ended" or time.monotonic() > deadline:
                    break
        return offset

    def _answer(self, client: httpx.Client, data: dict[str, Any], session_id: str, reply_with: str) -> dict[str, Any]:
        pid = data.get("permission_id")
        url = f"/v1/sessions/{session_id}/permissions/{quote(str(pid), safe='')}/reply"
        reply = client.post(url, json={"reply": reply_with})
        return {"permission_id": pid, "action": data.get("action"), "status": reply.status_code}

    def _collect_transcript(self) -> None:
        files = sorted(self.transcripts.glob("*.jsonl"))
        self.report["transcript_files"] = [str(f) for f in files]
        if not files:
            return
        lines = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
        self.report["transcript_lines"] = len(lines)
        methods: dict[str, int] = {}
        for line in lines:
            msg = line["msg"]
            if line["dir"] == "agent->client" and "method" in msg and "id" in msg:
                methods[msg["method"]] = methods.get(msg["method"], 0) + 1
        self.report["agent_requests"] = methods
        init = next((line["msg"] for line in lines if line["msg"].get("method") == "initialize"), None)
        self.report["client_capabilities"] = (init or {}).get("params", {}).get("clientCapabilities")
        self.report["transcript_text"] = "\n".join(json.dumps(line["msg"]) for line in lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, choices=sorted(RECIPES))
    parser.add_argument("--agent-command", required=True, help="JSON list: argv of the installed agent")
    parser.add_argument("--prompt", action="append", help="a prompt (repeatable); {dir} is the work dir")
    parser.add_argument("--slow-end", action="store_true", help="terminate during a slow streaming turn")
    parser.add_argument("--root", type=Path, help="work here instead of a fresh temp dir (kept)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument(
        "--extra", action="append", default=[], help="NAME=JSON: one more session created with these fields"
    )
    args = parser.parse_args(argv)
    recipe = RECIPES[args.agent]

    def execute(root: Path) -> dict[str, Any]:
        work = root / "work"
        default = f"[scenario:{','.join(recipe.steps)} dir={{dir}}] Follow the scripted steps."
        prompts = [p.replace("{dir}", str(work)) for p in (args.prompt or [default])]
        extra = {name: json.loads(body) for name, _, body in (e.partition("=") for e in args.extra)}
        return Run(recipe, json.loads(args.agent_command), root, prompts, args.slow_end, extra).execute()

    run_driver(f"acp-real-{recipe.name}-", execute, args.out, keep=args.keep, root=args.root)


if __name__ == "__main__":
    main()
