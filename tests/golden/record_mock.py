"""Records the built-in mock agent's ACP traffic as a golden transcript.

    .venv/bin/python -m tests.golden.record_mock [OUT]   (default tests/golden/transcripts/mock.jsonl)

The mock runs as a real process and is driven over stdio the way the bridge drives it: initialize,
session/new, then one session/prompt per command below. Every line in either direction is kept as
``{"t", "dir", "msg"}``. Then run ``python -m tests.golden.regen`` and review the expected events.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import ROOT

# Commands whose traffic the bridge must translate without any agent.unparsed (so not `error`,
# `unparsed` or `demo`, which report unparsed payloads on purpose).
PROMPTS = (
    "Reply with exactly the single word OK.",
    "Answer briefly and include your reasoning.",
    "tool",
    "status",
    "image",
    "unknown",
    "markdown",
    "plan",
    "diff",
    "v2",
    "title Golden session",
    "end",
)
OUT = ROOT / "tests" / "golden" / "transcripts" / "mock.jsonl"


class Recorder:
    def __init__(self, out: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.agents.mock"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin", "ACP_BRIDGE_MOCK_PACING_MS": "0"},
        )
        self.start = time.monotonic()
        self.lines: list[str] = []
        self.next_id = 0
        self.out = out

    def _keep(self, direction: str, msg: dict[str, Any]) -> None:
        record = {"t": round(time.monotonic() - self.start, 3), "dir": direction, "msg": msg}
        self.lines.append(json.dumps(record, ensure_ascii=False))

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        self._keep("client->agent", msg)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the mock agent exited")
            incoming = json.loads(line)
            self._keep("agent->client", incoming)
            if incoming.get("id") == self.next_id and "method" not in incoming:
                return incoming.get("result")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.out.write_text("\n".join(self.lines) + "\n", encoding="utf-8")


def main(argv: list[str]) -> None:
    recorder = Recorder(Path(argv[0]) if argv else OUT)
    recorder.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "recorder"}})
    meta = {"sandbox-agent/sessionId": "golden", "sandbox-agent/agent": "mock"}
    session = recorder.request("session/new", {"cwd": str(ROOT), "mcpServers": [], "_meta": meta})["sessionId"]
    for number, prompt in enumerate(PROMPTS, start=1):
        params = {
            "sessionId": session,
            "prompt": [{"type": "text", "text": prompt}],
            "_meta": {"sandbox-agent/turnId": f"turn_{number}"},
        }
        recorder.request("session/prompt", params)
    recorder.close()
    print(f"recorded {len(recorder.lines)} messages into {recorder.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
