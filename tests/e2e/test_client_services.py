"""The bridge as a complete ACP client: agents read and write files and run terminals through it.

The mock agent does file and terminal work end to end (files checked on disk, output in its reply
and in tool results, processes checked by pid); a probe agent checks the exact ACP answers.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import Fenced
from tests.support import (
    create_session,
    events,
    pid_alive,
    send,
    wait_for_events,
    wait_until,
)


def turn(client: httpx.Client, session_id: str, message: str) -> list[dict[str, Any]]:
    """Send a message and return the events of its turn (up to turn.ended)."""
    seen = events(client, session_id)
    offset = seen[-1]["sequence"] if seen else 0
    send(client, session_id, message)
    return wait_for_events(
        client, session_id, lambda evs: any(e["type"] == "turn.ended" for e in evs), offset=offset, timeout=30
    )


def assistant_text(evs: list[dict[str, Any]]) -> str:
    texts = []
    for event in evs:
        item = event["data"].get("item") if event["type"] == "item.completed" else None
        if item and item["role"] == "assistant" and item["kind"] == "message":
            texts += [part.get("text", "") for part in item["content"] if part["type"] == "text"]
    return "\n".join(texts)


def tool_results(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]["item"] for e in evs if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "tool_result"
    ]


# ---- the mock agent, through the shared bridge -----------------------------------------------------
def test_mock_writes_and_reads_files_through_the_bridge(client: httpx.Client, tmp_path: Path) -> None:
    create_session(client, "files-mock")
    path = tmp_path / "notes" / "hello.txt"
    text = "Hello from the mock ✓ with  spaces"
    reply = assistant_text(turn(client, "files-mock", f"write {path} {text}"))
    assert reply == f"Wrote {len(text.encode())} bytes to {path}."
    assert path.read_text(encoding="utf-8") == text
    assert os.listdir(path.parent) == ["hello.txt"]

    assert assistant_text(turn(client, "files-mock", f"read {path}")) == f"Contents of {path}:\n{text}"

    path.write_text("one\ntwo\nthree\n")
    assert assistant_text(turn(client, "files-mock", f"read {path} 2 1")) == f"Contents of {path}:\ntwo\n"

    missing = tmp_path / "missing.txt"
    reply = assistant_text(turn(client, "files-mock", f"read {missing}"))
    assert reply == f"Reading {missing} failed: Resource not found: {missing} (-32002)"


def test_mock_runs_a_terminal_through_the_bridge(client: httpx.Client) -> None:
    create_session(client, "terminal-mock")
    evs = turn(client, "terminal-mock", "run echo terminal-says-$((6*7)); echo to-stderr >&2")
    reply = assistant_text(evs)
    assert reply == "$ echo terminal-says-$((6*7)); echo to-stderr >&2\nterminal-says-42\nto-stderr\n[exit code 0]"
    # Where tool calls are translated, the terminal's output (looked up by terminal id: the mock puts
    # it nowhere else) shows in the tool result.
    results = tool_results(evs)
    if results:
        outputs = [part.get("output") for item in results for part in item["content"]]
        assert outputs == ["terminal-says-42\nto-stderr\n"]

    reply = assistant_text(turn(client, "terminal-mock", "run exit 3"))
    assert reply.endswith("[exit code 3]")


def test_agent_kill_after_a_timeout(client: httpx.Client) -> None:
    create_session(client, "terminal-timeout")
    reply = assistant_text(turn(client, "terminal-timeout", "run --timeout=0.3 echo pid=$$; exec sleep 60"))
    assert reply.endswith("[killed by SIGKILL]")
    pid = int(re.search(r"pid=(\d+)", reply).group(1))  # type: ignore[union-attr]
    assert wait_until(lambda: not pid_alive(pid), 5)


def test_terminals_are_killed_when_the_session_is_terminated(client: httpx.Client) -> None:
    create_session(client, "terminal-end")
    reply = assistant_text(turn(client, "terminal-end", "spawn echo pid=$$; exec sleep 60"))
    pid = int(re.search(r"pid=(\d+)", reply).group(1))  # type: ignore[union-attr]
    assert pid_alive(pid)
    assert os.getpgid(pid) == pid  # its own process group
    assert client.post("/v1/sessions/terminal-end/terminate").status_code == 204
    assert wait_until(lambda: not pid_alive(pid), 5)


# ---- exact ACP answers, through a probe agent ----------------------------------------------------------
def probe(client: httpx.Client, session_id: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    reply = assistant_text(turn(client, session_id, json.dumps(calls)))
    result: dict[str, Any] = json.loads(reply)
    return result


def test_capabilities_are_advertised(fenced: Fenced) -> None:
    root = fenced.root
    client = fenced.bridge.client()
    create_session(client, "caps", agent="client-probe")
    report = probe(client, "caps", [])
    assert report["capabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert report["capabilities"]["terminal"] is True
    assert report["cwd"] == str(root)


def test_fs_answers(fenced: Fenced) -> None:
    root, outside = fenced.root, fenced.outside
    client = fenced.bridge.client()
    create_session(client, "fs-probe", agent="client-probe")
    path = root / "deep" / "new.txt"
    (outside / "secret.txt").write_text("secret")
    (root / "secret-link").symlink_to(outside / "secret.txt")
    responses = probe(
        client,
        "fs-probe",
        [
            ("fs/write_text_file", {"path": str(path), "content": "l1\nl2\r\nl3\nl4"}),
            ("fs/read_text_file", {"path": str(path)}),
            ("fs/read_text_file", {"path": str(path), "line": 2, "limit": 2}),
            ("fs/read_text_file", {"path": str(root / "nope.txt")}),
            ("fs/read_text_file", {"path": "relative.txt"}),
            ("fs/write_text_file", {"path": str(root), "content": "x"}),
            ("fs/read_text_file", {"path": str(outside / "secret.txt")}),
            ("fs/read_text_file", {"path": str(root / "secret-link")}),
            ("fs/write_text_file", {"path": str(outside / "new.txt"), "content": "x"}),
            ("fs/read_text_file", {"path": 5}),
        ],
    )["responses"]
    assert responses[0] == {"result": {}}  # an empty object, not null
    assert path.read_bytes() == b"l1\nl2\r\nl3\nl4"
    assert responses[1] == {"result": {"content": "l1\nl2\r\nl3\nl4"}}
    assert responses[2] == {"result": {"content": "l2\r\nl3\n"}}
    assert responses[3]["error"]["code"] == -32002
    assert responses[3]["error"]["message"].startswith("Resource not found")
    assert responses[4]["error"]["code"] == -32602
    assert responses[5]["error"]["code"] == -32603
    assert "Is a directory" in responses[5]["error"]["message"]
    for denied in responses[6:9]:
        assert denied["error"]["code"] == -32603
        assert "outside the allowed filesystem roots" in denied["error"]["message"]
    assert responses[9]["error"]["code"] == -32602
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_terminal_answers(fenced: Fenced) -> None:
    root = fenced.root
    client = fenced.bridge.client()
    workdir = root / "work"
    workdir.mkdir()
    create_session(client, "term-probe", agent="client-probe", directory=str(workdir))
    script = "import os; print(os.getcwd(), os.environ['PROBE_VAR'])"
    responses = probe(
        client,
        "term-probe",
        [
            ("terminal/create", {"command": "printf '€€€€€€€€€€'", "outputByteLimit": 10}),
            ("terminal/wait_for_exit", {"terminalId": "term_1"}),
            ("terminal/output", {"terminalId": "term_1"}),
            ("terminal/release", {"terminalId": "term_1"}),
            ("terminal/output", {"terminalId": "term_1"}),
            (
                "terminal/create",
                {
                    "command": sys.executable,
                    "args": ["-c", script],
                    "env": [{"name": "PROBE_VAR", "value": "from-env"}],
                    "cwd": str(root),
                },
            ),
            ("terminal/wait_for_exit", {"terminalId": "term_2"}),
            ("terminal/output", {"terminalId": "term_2"}),
            ("terminal/create", {"command": "pwd; exec sleep 60"}),
            ("terminal/kill", {"terminalId": "term_3"}),
            ("terminal/output", {"terminalId": "term_3"}),
            ("terminal/wait_for_exit", {"terminalId": "term_3"}),
            ("terminal/release", {"terminalId": "term_3"}),
            ("terminal/create", {"command": "/no/such/program", "args": ["x"]}),
            ("terminal/create", {"command": "no-such-program-here"}),
            ("terminal/wait_for_exit", {"terminalId": "term_5"}),
            ("terminal/kill", {"terminalId": "term_99"}),
        ],
    )["responses"]
    assert responses[0] == {"result": {"terminalId": "term_1"}}
    assert responses[1] == {"result": {"exitCode": 0, "signal": None}}
    assert responses[2] == {
        "result": {"output": "€€€", "truncated": True, "exitStatus": {"exitCode": 0, "signal": None}}
    }
    assert responses[3] == {"result": {}}
    assert responses[4]["error"]["code"] == -32602  # released: the id is no longer valid
    assert responses[5] == {"result": {"terminalId": "term_2"}}
    assert responses[7]["result"]["output"] == f"{root} from-env\n"
    assert responses[9] == {"result": {}}
    killed = responses[10]["result"]
    assert killed["exitStatus"] == {"exitCode": None, "signal": "SIGKILL"}
    assert killed["output"] in ("", f"{workdir}\n")  # the session's directory is the default cwd
    assert responses[11] == {"result": {"exitCode": None, "signal": "SIGKILL"}}
    assert responses[13]["error"]["code"] == -32603
    assert "/no/such/program" in responses[13]["error"]["message"]
    assert responses[15] == {"result": {"exitCode": 127, "signal": None}}  # a shell line: the shell says 127
    assert responses[16]["error"]["code"] == -32602


def test_default_terminal_cwd_is_the_session_directory(fenced: Fenced) -> None:
    root = fenced.root
    client = fenced.bridge.client()
    workdir = root / "cwd-check"
    workdir.mkdir()
    create_session(client, "term-cwd", agent="client-probe", directory=str(workdir))
    responses = probe(
        client,
        "term-cwd",
        [
            ("terminal/create", {"command": "pwd"}),
            ("terminal/wait_for_exit", {"terminalId": "term_1"}),
            ("terminal/output", {"terminalId": "term_1"}),
        ],
    )["responses"]
    assert responses[2]["result"]["output"] == f"{workdir}\n"


def test_mock_file_access_is_confined_too(fenced: Fenced) -> None:
    root, outside = fenced.root, fenced.outside
    client = fenced.bridge.client()
    create_session(client, "confined-mock")
    reply = assistant_text(turn(client, "confined-mock", f"write {outside / 'x.txt'} nope"))
    assert "outside the allowed filesystem roots" in reply
    assert not (outside / "x.txt").exists()
    assert assistant_text(turn(client, "confined-mock", "write inside.txt yes")).startswith("Wrote 3 bytes")
    assert (root / "inside.txt").read_text() == "yes"
