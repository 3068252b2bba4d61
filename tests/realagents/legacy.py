"""Drive the legacy agent ids (``claude``, ``codex``, ``opencode``) and agents of the ACP registry's
catalog (``gemini``, ``qwen-code``: no agents file) the way users run them, and print a JSON report.

Runs as the first process of a loopback-only network namespace (``netns.py``). It starts the fake
LLM, points the agent's own configuration at it (as a user would point it at their provider), and
starts real bridges whose environment is the agent's. Then, through the REST API only:

1. ``GET /v1/agents`` and a create with the agent's key missing (the create must say which
   variables would work), on a bridge without the key;
2. ``POST /v1/agents/{agent}/install`` (npm from the registry; the install dir is kept in the
   test cache, so a rerun finds it installed) on a bridge with the key;
3. ``GET /v1/agents/{agent}/models`` and ``/modes``, then one session per case of the agent's
   script: create with the case's fields, send its prompts, answer every permission with the
   case's reply, wait for the turn's end, read SessionInfo and the events, terminate.

Each case works in its own directory; the report has, per case, the create answer, SessionInfo,
the events, the files left in the directory and the model requests made during the case.

    python -m tests.realagents.legacy --agent codex --out report.json

With ``--record`` (run it inside the namespace, see ``netns.py``), the wire transcript of the agent's
``once`` case, made stable like the other golden recordings, is written to
``tests/golden/transcripts/legacy-<agent>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from app.agents.acp_catalog import load_snapshot
from app.agents.profiles import PROFILES, version_key
from tests.realagents import agents
from tests.realagents.agents import AgentUnavailable, asked_version, cache_root, published_version
from tests.realagents.fake_llm import FakeLLMServer
from tests.realagents.netns import isolation, opted_out, run_driver, unavailable
from tests.realagents.record import GOLDEN, normalise
from tests.support import Bridge, iter_sse, start_bridge
from tests.tiers import real_part

TURN_TIMEOUT = 90.0
STEPS = "[scenario:{steps} dir={dir}] Follow the scripted steps."


# Set by the driver: "0" while it runs a codex-acp 0.x (codex 0.137), whose configuration differs.
CODEX_GENERATION = "ACP_BRIDGE_TEST_CODEX_GENERATION"


def default_version(agent: str) -> str:
    """What the bridge installs by default: a legacy id's newest tested version, a registry agent's
    catalog version (the snapshot's)."""
    if agent in AGENTS and AGENTS[agent].registry:
        tested = AGENTS[agent].tested
        entry = load_snapshot().get(agent)
        assert entry is not None, f"{agent} is not in the ACP registry snapshot"
        return tested or entry.version
    npm = PROFILES[agent].npm
    assert npm is not None, agent
    return npm.version


def package_of(agent: str) -> str:
    """The npm package of an agent (latest versions are asked of npm)."""
    if agent in AGENTS and AGENTS[agent].registry:
        entry = load_snapshot().get(agent)
        assert entry is not None and entry.npx is not None, agent
        return entry.package_names()[0]
    npm = PROFILES[agent].npm
    assert npm is not None, agent
    return npm.package


def wanted_version(agent: str) -> str:
    """The version of an agent these tests run: the one the bridge installs by default (a legacy id's
    newest tested, a registry agent's catalog version), or what ``ACP_BRIDGE_TEST_AGENT_VERSIONS``
    says: ``latest`` (the newest published, asked of npm), or ``codex=2.5.0,claude=latest``."""
    wanted = asked_version(agent) or default_version(agent)
    if wanted == "latest":
        try:
            wanted = published_version(package_of(agent))
        except AgentUnavailable as exc:
            unavailable(str(exc))
    return wanted


def install_dir(agent: str, version: str) -> Path:
    """Where the bridge installs one version of a legacy agent in these tests: kept between runs, one
    install dir per version (runs of other versions, or of other checkouts, leave it alone)."""
    return cache_root().parent / "bin-by-version" / f"{agent}@{version}"


def node_dir() -> Path:
    """Where the bridge puts its own Node.js (an adapter may need a newer one than the system's)."""
    return cache_root().parent / "node"


def link_cache(data: Path, agent: str, version: str) -> None:
    """A bridge data dir whose install dir and on-demand Node.js are the kept ones of the test cache."""
    data.mkdir(parents=True, exist_ok=True)
    for name, target in (("bin", install_dir(agent, version)), ("node", node_dir())):
        target.mkdir(parents=True, exist_ok=True)
        (data / name).symlink_to(target, target_is_directory=True)


# Bridges of these tests run with the defaults: they bring their own Node.js when an adapter needs a
# newer one than the system's (Node.js on demand is on unless turned off).
BRIDGE_ENV: dict[str, str] = {}


@dataclass(slots=True)
class Case:
    name: str
    body: dict[str, Any] = field(default_factory=dict)
    steps: str | None = "write,edit,read,shell"  # None: no prompt
    reply: str = "once"
    # A prompt sent as it is ({dir} is the case's directory), after the scripted one.
    extra_prompts: tuple[str, ...] = ()
    # Which of the agent's configurations the bridge runs it with (one bridge per configuration).
    config: str = "user"


# ---- per agent: its configuration, the variable that is its key, and its cases ----------------------
def codex_env(home: Path, llm: str, config: str = "user") -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    # As a user with only an API key: the built-in OpenAI provider, its address moved to the fake.
    lines = [f'openai_base_url = "{llm}/v1"', "check_for_update_on_startup = false"]
    if config == "ask" and os.environ.get(CODEX_GENERATION) == "0":
        # Ask before patches and commands, run them unsandboxed (codex's sandbox needs bubblewrap).
        lines += ['approval_policy = "untrusted"', 'sandbox_mode = "danger-full-access"']
    elif config == "ask":
        # codex 0.166 (codex-acp 2.x) refuses "untrusted": start read-only, asking before edits.
        lines += ['approval_policy = "on-request"', 'sandbox_mode = "read-only"']
    lines += ["[analytics]", "enabled = false"]
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    tmp = home / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**agents.home_env(home), "CODEX_HOME": str(codex_home), "TMPDIR": str(tmp), "OPENAI_API_KEY": "sk-fake"}


def claude_env(home: Path, llm: str, config: str = "user") -> dict[str, str]:
    return agents.claude_env(home, llm)  # one configuration for every case


def opencode_env(home: Path, llm: str, config: str = "user") -> dict[str, str]:
    config_dir = home / ".config" / "opencode"
    config_dir.mkdir(parents=True, exist_ok=True)
    # Prices (USD per million tokens) so that opencode reports a cost.
    cost = {"input": 1.0, "output": 4.0, "cache_read": 0.5, "cache_write": 2.0}
    models = {
        "fake-model": {"name": "Fake Model", "tool_call": True, "limit": {"context": 100000, "output": 8000}},
        "fake-large": {"name": "Fake Large", "tool_call": True, "limit": {"context": 100000, "output": 8000}},
    }
    for model in models.values():
        model["cost"] = cost
    settings: dict[str, Any] = {
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{llm}/v1", "apiKey": "{env:OPENAI_API_KEY}"},
                "models": models,
            }
        },
        # Ask before build edits and commands; the plan agent keeps its own (read-only) rules.
        "agent": {"build": {"permission": {"edit": "ask", "bash": "ask"}}},
    }
    (config_dir / "opencode.json").write_text(json.dumps(settings))
    return {
        **agents.home_env(home),
        "OPENAI_API_KEY": "sk-fake",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }


def gemini_env(home: Path, llm: str, config: str = "user") -> dict[str, str]:
    agents._gemini_home(home)
    return agents._gemini_env(home, llm)


def qwen_env(home: Path, llm: str, config: str = "user") -> dict[str, str]:
    """qwen-code as a user with an OpenAI-compatible provider: its key, base URL and model."""
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    return {
        **agents.home_env(home),
        "OPENAI_API_KEY": "sk-fake",
        "OPENAI_BASE_URL": f"{llm}/v1",
        "OPENAI_MODEL": "fake-model",
    }


@dataclass(frozen=True, slots=True)
class LegacyAgent:
    id: str
    env: Any
    # The variables that give it credentials (left out for the missing-key check).
    key: tuple[str, ...]
    cases: tuple[Case, ...]
    # The cases of versions before 1.0, where they differ (codex-acp 0.x: other modes and config).
    cases_0: tuple[Case, ...] | None = None
    # An agent of the ACP registry's catalog (run by its registry id, no agents file), and the version
    # these tests run by default (the snapshot's catalog may name one npm no longer serves).
    registry: bool = False
    tested: str | None = None

    def cases_for(self, version: str) -> tuple[Case, ...]:
        key = version_key(version)
        if self.cases_0 is not None and key is not None and key < (1, 0, 0):
            return self.cases_0
        return self.cases


AGENTS: dict[str, LegacyAgent] = {
    "codex": LegacyAgent(
        "codex",
        codex_env,
        ("OPENAI_API_KEY",),
        # codex-acp 2.x: the default model runs its tools from JavaScript (code mode); the agent's own
        # default mode ("auto review") asks for nothing here, read-only (legacy plan) before each edit.
        (
            Case(
                "bypass", {"permissionMode": "bypass", "model": "gpt-5.5", "variant": "high"}, "write,edit,read,shell"
            ),
            Case("default", {}, "think,write,edit,read,shell"),
            Case("accept_edits", {"permissionMode": "acceptEdits"}, "write,edit,rewrite"),
            Case("plan", {"permissionMode": "plan"}, "write", reply="reject"),
            Case("unknown_model", {"model": "no-such-model"}, None),
            Case("unknown_variant", {"variant": "turbo"}, None),
            Case("once", {"permissionMode": "plan", "model": "gpt-6.1-sol"}, "write,edit,read,shell", reply="once"),
            Case("always", {"permissionMode": "plan"}, "write,edit", reply="always"),
            Case("reject", {"permissionMode": "plan"}, "write", reply="reject"),
        ),
        (
            Case(
                "bypass", {"permissionMode": "bypass", "model": "gpt-5.4", "variant": "high"}, "write,edit,read,shell"
            ),
            Case("plan", {"permissionMode": "plan"}, "write", reply="reject"),
            Case("unknown_model", {"model": "no-such-model"}, None),
            Case("unknown_variant", {"variant": "ultra"}, None),
            Case("once", {"model": "gpt-5.4-mini"}, "write,edit,read,shell,touch", reply="once", config="ask"),
            Case("always", {}, "write,edit,touch", reply="always", config="ask"),
            Case("reject", {}, "write", reply="reject", config="ask"),
        ),
    ),
    "claude": LegacyAgent(
        "claude",
        claude_env,
        ("ANTHROPIC_API_KEY",),
        (
            Case("once", {"model": "opus"}, "write,edit,read,shell,touch", reply="once"),
            Case("always", {"model": "claude-sonnet-4-5"}, "write,edit", reply="always"),
            Case("reject", {}, "write", reply="reject"),
            Case("accept_edits", {"permissionMode": "acceptEdits"}, "write,edit,rewrite"),
            Case("plan", {"permissionMode": "plan"}, "write", reply="reject"),
            # Refused as root (claude will not skip permissions with root privileges), as legacy did.
            Case("bypass", {"permissionMode": "bypass"}, "write,edit"),
            Case("unknown_model", {"model": "gpt-4o"}, None),
        ),
    ),
    "opencode": LegacyAgent(
        "opencode",
        opencode_env,
        ("OPENAI_API_KEY",),
        (
            Case("once", {"model": "fake/fake-large"}, "write,edit,read,shell", reply="once"),
            Case("always", {}, "write,edit,rewrite", reply="always"),
            Case("reject", {}, "write", reply="reject"),
            Case("plan", {"agentMode": "plan"}, "write"),
            Case("unknown_mode", {"agentMode": "no-such-agent"}, None),
        ),
    ),
}


# Agents of the ACP registry, by their registry ids: the bridge runs them with the profile their
# package matches (gemini) or the generic one (qwen-code).
REGISTRY_AGENTS: dict[str, LegacyAgent] = {
    "gemini": LegacyAgent(
        "gemini",
        gemini_env,
        ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
        (
            Case("once", {}, "write,edit,read,shell", reply="once"),
            Case("accept_edits", {"permissionMode": "acceptEdits"}, "write,edit,rewrite"),
            Case("bypass", {"permissionMode": "bypass"}, "write,edit,shell"),
            Case("plan", {"permissionMode": "plan"}, "write", reply="reject"),
            Case("reject", {}, "write", reply="reject"),
        ),
        registry=True,
        tested=PROFILES["gemini"].npm.version if PROFILES["gemini"].npm else None,
    ),
    "qwen-code": LegacyAgent(
        "qwen-code",
        qwen_env,
        ("OPENAI_API_KEY",),
        (
            Case("once", {}, "write,edit,read,shell", reply="once"),
            Case("always", {}, "write,edit,rewrite", reply="always"),
            Case("reject", {}, "write", reply="reject"),
            Case("accept_edits", {"permissionMode": "acceptEdits"}, "write,edit"),
            Case("plan", {"permissionMode": "plan"}, "write", reply="reject"),
        ),
        registry=True,
        tested="0.24.4",
    ),
}
AGENTS.update(REGISTRY_AGENTS)


class Driver:
    def __init__(self, agent: LegacyAgent, root: Path, version: str, *, keyless: bool = True) -> None:
        self.keyless = keyless  # first, a bridge without the agent's key (credentials, refused create)
        self.agent = agent
        self.version = version
        self.cases = agent.cases_for(version)
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        self.data = root / "data"
        self.transcripts = root / "transcripts"
        self.report: dict[str, Any] = {"agent": agent.id, "version": version, "cases": {}, "timings": {}}

    def _timed(self, name: str, started: float) -> None:
        self.report["timings"][name] = round(time.monotonic() - started, 3)

    def execute(self) -> dict[str, Any]:
        for d in (self.home, self.work, self.transcripts):
            d.mkdir(parents=True, exist_ok=True)
        # The install dir lives in the test cache: the first run installs with npm, later runs reuse it.
        link_cache(self.data, self.agent.id, self.version)
        llm = FakeLLMServer(self.root / "llm.jsonl").start()
        try:
            if self.keyless:
                self._without_key(self.agent.env(self.home, llm.base_url))
            self._with_key(llm)
        except Exception as exc:
            self.report["failure"] = f"{type(exc).__name__}: {exc}"
        finally:
            llm.stop()
        self.report["transcript_files"] = sorted(str(p) for p in self.transcripts.glob("*.jsonl"))
        return self.report

    def _bridge(self, env: dict[str, str]) -> Bridge:
        bridge_env = {
            **env,
            **BRIDGE_ENV,
            "ACP_BRIDGE_TRANSCRIPT_DIR": str(self.transcripts),
            "ACP_BRIDGE_INSTALL_TIMEOUT": "300",
        }
        return start_bridge(self.root, env=bridge_env, data_dir=self.data, cwd=self.work)

    def _without_key(self, env: dict[str, str]) -> None:
        keyless = {k: v for k, v in env.items() if k not in self.agent.key}
        # start_bridge adds os.environ: the driver's environment has no agent keys (scrubbed).
        bridge = self._bridge(keyless)
        try:
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                agents = client.get("/v1/agents").json()["agents"]
                info = next(a for a in agents if a["id"] == self.agent.id)
                self.report["keyless_agent_info"] = info
                if info["installed"]:
                    work = self.work / "keyless"
                    work.mkdir()
                    body = {"agent": self.agent.id, "directory": str(work)}
                    started = time.monotonic()
                    created = client.post("/v1/sessions/keyless", json=body)
                    self._timed("keyless_create", started)
                    self.report["keyless_create"] = {"status": created.status_code, "body": created.json()}
                    if created.status_code == 200:
                        client.post("/v1/sessions/keyless/terminate")
        finally:
            bridge.stop()

    def _with_key(self, llm: FakeLLMServer) -> None:
        configs = list(dict.fromkeys(case.config for case in self.cases))
        for number, config in enumerate(configs):
            env = self.agent.env(self.home, llm.base_url, config)
            cases = [case for case in self.cases if case.config == config]
            self._run_cases(env, llm, cases, first=number == 0)

    def _run_cases(self, env: dict[str, str], llm: FakeLLMServer, cases: list[Case], *, first: bool) -> None:
        bridge = self._bridge(env)
        try:
            with httpx.Client(base_url=bridge.url, timeout=60.0) as client:
                if first:
                    started = time.monotonic()
                    installed = client.post(f"/v1/agents/{self.agent.id}/install", json={})
                    self._timed("install", started)
                    self.report["install"] = {"status": installed.status_code, "body": installed.text[-2000:]}
                    agents = client.get("/v1/agents").json()["agents"]
                    self.report["agent_info"] = next(a for a in agents if a["id"] == self.agent.id)
                    self.report["models_before"] = client.get(f"/v1/agents/{self.agent.id}/models").json()
                for case in cases:
                    logged = len(llm.log.entries)
                    started = time.monotonic()
                    result = self._case(client, case)
                    self._timed(f"case_{case.name}", started)
                    result["llm_requests"] = llm.log.entries[logged:]
                    self.report["cases"][case.name] = result
                    if case is self.cases[0]:
                        self.report["models_after"] = client.get(f"/v1/agents/{self.agent.id}/models").json()
                        self.report["modes_after"] = client.get(f"/v1/agents/{self.agent.id}/modes").json()
                # What the bridge counted for these cases (tokens and cost by agent).
                metrics = {"cases": [case.name for case in cases], "text": client.get("/metrics").text}
                self.report.setdefault("metrics", []).append(metrics)
        finally:
            bridge.stop()
            self.report["bridge_log_tail"] = bridge.log()[-4000:]

    def _case(self, client: httpx.Client, case: Case) -> dict[str, Any]:
        work = self.work / case.name
        work.mkdir()
        session_id = f"{self.agent.id}-{case.name}"
        body = {"agent": self.agent.id, "directory": str(work), **case.body}
        created = client.post(f"/v1/sessions/{session_id}", json=body)
        result: dict[str, Any] = {"create": {"status": created.status_code, "body": created.json()}}
        result["steps"] = case.steps
        result["create_body"] = case.body
        if created.status_code != 200:
            return result
        answered: list[dict[str, Any]] = []
        offset = 0
        prompts = [STEPS.format(steps=case.steps, dir=work)] if case.steps else []
        prompts += [p.replace("{dir}", str(work)) for p in case.extra_prompts]
        for prompt in prompts:
            sent = client.post(f"/v1/sessions/{session_id}/messages", json={"message": prompt})
            if sent.status_code != 204:
                result["send_failure"] = {"status": sent.status_code, "body": sent.text}
                break
            offset = self._follow(client, session_id, offset, case.reply, answered)
        result["permissions_answered"] = answered
        sessions = client.get("/v1/sessions").json()["sessions"]
        result["info"] = next((s for s in sessions if s["sessionId"] == session_id), None)
        terminated = client.post(f"/v1/sessions/{session_id}/terminate")
        result["terminate_status"] = terminated.status_code
        page = client.get(f"/v1/sessions/{session_id}/events", params={"offset": 0, "limit": 100000})
        result["events"] = page.json().get("events", [])
        result["files"] = {
            str(p.relative_to(work)): p.read_text(errors="replace") for p in sorted(work.rglob("*")) if p.is_file()
        }
        result["settings_sent"] = self._settings_sent(session_id)
        return result

    def _settings_sent(self, session_id: str) -> list[list[Any]]:
        """What the bridge asked the agent to change after session/new: [method, id, value]."""
        path = self.transcripts / f"{session_id}.jsonl"
        sent: list[list[Any]] = []
        if not path.exists():
            return sent
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            msg = record["msg"]
            params = msg.get("params") or {}
            if record["dir"] != "client->agent":
                continue
            if msg.get("method") == "session/set_mode":
                sent.append(["set_mode", "mode", params.get("modeId")])
            elif msg.get("method") == "session/set_config_option":
                sent.append(["set_config_option", params.get("configId"), params.get("value")])
            elif msg.get("method") == "authenticate":
                sent.append(["authenticate", params.get("methodId"), None])
        return sent

    def _follow(self, client: httpx.Client, session_id: str, offset: int, reply: str, answered: list[Any]) -> int:
        deadline = time.monotonic() + TURN_TIMEOUT
        url = f"/v1/sessions/{session_id}/events/sse"
        with client.stream("GET", url, params={"offset": offset}, timeout=httpx.Timeout(TURN_TIMEOUT)) as response:
            for event in iter_sse(response):
                offset = max(offset, int(event["sequence"]))
                kind = event["type"]
                if kind == "permission.requested":
                    data = event["data"]
                    pid = quote(str(data["permission_id"]), safe="")
                    answer = client.post(f"/v1/sessions/{session_id}/permissions/{pid}/reply", json={"reply": reply})
                    answered.append(
                        {"permission_id": data["permission_id"], "action": data["action"], "status": answer.status_code}
                    )
                if kind in ("turn.ended", "session.ended") or time.monotonic() > deadline:
                    break
        return offset


def record_transcript(agent: str, root: Path) -> Path:
    source = root / "transcripts" / f"{agent}-once.jsonl"
    lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = normalise(lines, root)
    target = GOLDEN / f"legacy-{agent}.jsonl"
    with target.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    return target


@real_part("realagents")
def install_outside(agent: str, version: str, timeout: float = 600.0) -> dict[str, Any]:
    """``POST /v1/agents/{agent}/install`` on a bridge outside the namespace (npm needs the registry),
    into the kept install dir; the driver's own install call then finds the agent installed."""
    with agents.locked(cache_root().parent / f".install-{agent}@{version}.lock"):  # one install per version
        return _install_outside(agent, version, timeout)


def install_default(agent: str) -> str | None:
    """The version ``POST /v1/agents/{agent}/install`` installs without ``agentVersion``: a legacy
    id's newest tested, a registry agent's catalog version."""
    if agent in PROFILES and not (agent in AGENTS and AGENTS[agent].registry):
        return default_version(agent)
    entry = load_snapshot().get(agent)
    return entry.version if entry is not None else None


def _install_outside(agent: str, version: str, timeout: float) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"acp-legacy-install-{agent}-{os.getpid()}-")).resolve()
    link_cache(root / "data", agent, version)
    env = {**BRIDGE_ENV, "ACP_BRIDGE_INSTALL_TIMEOUT": str(int(timeout))}
    bridge = start_bridge(root, env=env, data_dir=root / "data")
    try:
        started = time.monotonic()
        with httpx.Client(base_url=bridge.url, timeout=timeout + 30) as client:
            # The default install (a legacy agent's tested version; a registry agent's catalog version).
            body = {} if version == install_default(agent) else {"agentVersion": version}
            answer = client.post(f"/v1/agents/{agent}/install", json=body)
            info = next(a for a in client.get("/v1/agents").json()["agents"] if a["id"] == agent)
        return {
            "agent_info": info,
            "status": answer.status_code,
            "body": answer.text[-3000:],
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        bridge.stop()
        shutil.rmtree(root, ignore_errors=True)


def ready(agent: str, version: str | None = None) -> dict[str, Any]:
    """Before a test's driver runs a legacy agent: not opted out, a loopback-only namespace, npm and
    node, the agent installed (``install_outside``, whose answer this is). Else the test fails (or
    skips) with the reason."""
    opted_out()
    iso = isolation()
    if not iso.available:
        unavailable(iso.reason)
    from tests.support import ensure_node

    failure = ensure_node()  # the suite installs Node.js where the machine has none
    if shutil.which("npm") is None or shutil.which("node") is None:
        unavailable(f"npm/node are not installed ({failure}): the {agent} agent is an npm package")
    installed = install_outside(agent, version or wanted_version(agent))
    if installed["status"] != 204:
        unavailable(f"{agent} could not be installed: {installed['body'][-1500:]}")
    return installed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, choices=sorted(AGENTS))
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--record", action="store_true", help="write the golden transcript of the once case")
    parser.add_argument("--version", help="the installed version to run (default: the tested one)")
    args = parser.parse_args(argv)

    def execute(root: Path) -> dict[str, Any]:
        version = args.version or wanted_version(args.agent)
        key = version_key(version)
        os.environ[CODEX_GENERATION] = "0" if key is not None and key < (1, 0, 0) else "2"
        report = Driver(AGENTS[args.agent], root, version).execute()
        report["root"] = str(root)
        if args.record:
            report["recorded"] = str(record_transcript(args.agent, root))
        return report

    run_driver(f"acp-legacy-{args.agent}-", execute, args.out, keep=args.keep)


if __name__ == "__main__":
    main()
