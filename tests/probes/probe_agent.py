#!/usr/bin/env python3
"""A small ACP agent for tests (stdlib only). Behaviour flags come from PROBE_MODE (comma separated):

- (none)              answer every prompt with an agent_message_chunk "probe: <text>"
- exit_on_initialize  print to stderr and exit 3 when asked to initialize
- exit_after_prompt   print stderr lines and exit 7 when a prompt arrives
- stubborn            ignore SIGTERM and stdin EOF (only SIGKILL ends it); spawns a `sleep` child too
- big_line            the reply is one 16 MiB chunk
- garbage             write a non-JSON line before replying
- slow                the reply waits until session/cancel arrives, then answers "cancelled"
- huge_line           before the reply, one session/update line of PROBE_HUGE_BYTES (default 100 MiB)
- ask_client          before the reply, asks the client fs/read_text_file of PROBE_ASK_PATH; the reply
                      is the JSON of the client's answer

PROBE_PID_FILE, when set, receives this process's pid (and its child's, one per line).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import probe_rpc as rpc
from probe_rpc import Message

MODE = set(filter(None, os.environ.get("PROBE_MODE", "").split(",")))
cancelled = threading.Event()
outgoing = rpc.Outgoing()


def initialize(msg: Message) -> None:
    if "exit_on_initialize" in MODE:
        sys.stderr.write("probe: refusing to initialize\nprobe: second stderr line\n")
        sys.stderr.flush()
        os._exit(3)
    rpc.result(
        msg,
        {
            "protocolVersion": 1,
            "agentCapabilities": {"promptCapabilities": {"image": False, "embeddedContext": False}},
            "agentInfo": {"name": "probe", "version": "0.0.1"},
        },
    )


def cancel(msg: Message) -> None:
    cancelled.set()


def huge_line(sid: str) -> None:
    size = int(os.environ.get("PROBE_HUGE_BYTES", str(100 * 1024 * 1024)))
    head = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + json.dumps(sid) + ',"update":'
    head += '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
    with rpc.OUT_LOCK:  # one line, written a MiB at a time
        sys.stdout.write(head)
        block = "y" * (1 << 20)
        for _ in range(size // len(block)):
            sys.stdout.write(block)
        sys.stdout.write('"}}}\n')
        sys.stdout.flush()


def prompt(msg: Message) -> None:
    sid = msg["params"]["sessionId"]
    text = rpc.prompt_text(msg)
    if "exit_after_prompt" in MODE:
        for i in range(30):
            sys.stderr.write(f"probe stderr line {i}\n")
        sys.stderr.flush()
        os._exit(7)
    if "huge_line" in MODE:
        huge_line(sid)
    if "ask_client" in MODE:
        params = {"sessionId": sid, "path": os.environ.get("PROBE_ASK_PATH", "/etc/hostname")}
        answer = outgoing.wait(outgoing.send("fs/read_text_file", params, request_id="ask-1"), 30)
        text = json.dumps({k: v for k, v in answer.items() if k in ("result", "error")} if answer else None)
    if "garbage" in MODE:
        rpc.write_text("this is not json\n")
    reply = "x" * (16 * 1024 * 1024) if "big_line" in MODE else f"probe: {text}"
    if "slow" in MODE:
        cancelled.wait(30)
        rpc.result(msg, {"stopReason": "cancelled"})
        return
    rpc.update(sid, rpc.text_chunk(reply, "probe-msg"))
    rpc.result(msg, {"stopReason": "end_turn"})


def main() -> None:
    pids = [str(os.getpid())]
    if "stubborn" in MODE:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        pids.append(str(child.pid))
    if os.environ.get("PROBE_PID_FILE"):
        with open(os.environ["PROBE_PID_FILE"], "w") as fh:
            fh.write("\n".join(pids) + "\n")
    rpc.serve(
        {
            "initialize": initialize,
            "session/new": lambda msg: rpc.result(msg, {"sessionId": "probe-session-1"}),
            "session/cancel": cancel,
            "session/prompt": rpc.on_thread(prompt),
        },
        outgoing,
    )
    if "stubborn" in MODE:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()
