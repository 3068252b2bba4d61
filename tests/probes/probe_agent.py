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

import json
import os
import signal
import subprocess
import sys
import threading
import time

MODE = set(filter(None, os.environ.get("PROBE_MODE", "").split(",")))
out_lock = threading.Lock()
cancelled = threading.Event()
asked = threading.Event()
answers = {}


def send(obj):
    data = json.dumps(obj, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def main():
    pids = [str(os.getpid())]
    if "stubborn" in MODE:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        pids.append(str(child.pid))
    if os.environ.get("PROBE_PID_FILE"):
        with open(os.environ["PROBE_PID_FILE"], "w") as fh:
            fh.write("\n".join(pids) + "\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        if method == "initialize":
            if "exit_on_initialize" in MODE:
                sys.stderr.write("probe: refusing to initialize\nprobe: second stderr line\n")
                sys.stderr.flush()
                os._exit(3)
            send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"promptCapabilities": {"image": False, "embeddedContext": False}},
                        "agentInfo": {"name": "probe", "version": "0.0.1"},
                    },
                }
            )
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "probe-session-1"}})
        elif method == "session/cancel":
            cancelled.set()
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(msg,), daemon=True).start()
        elif "id" in msg and "method" not in msg:
            answers[msg["id"]] = {k: v for k, v in msg.items() if k in ("result", "error")}
            asked.set()
        elif "id" in msg and "method" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    if "stubborn" in MODE:
        while True:
            time.sleep(60)


def prompt(msg):
    params = msg["params"]
    sid = params["sessionId"]
    text = "".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    if "exit_after_prompt" in MODE:
        for i in range(30):
            sys.stderr.write(f"probe stderr line {i}\n")
        sys.stderr.flush()
        os._exit(7)
    if "huge_line" in MODE:
        size = int(os.environ.get("PROBE_HUGE_BYTES", str(100 * 1024 * 1024)))
        head = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + json.dumps(sid) + ',"update":'
        head += '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
        with out_lock:
            sys.stdout.write(head)
            block = "y" * (1 << 20)
            for _ in range(size // len(block)):
                sys.stdout.write(block)
            sys.stdout.write('"}}}\n')
            sys.stdout.flush()
    if "ask_client" in MODE:
        asked.clear()
        send(
            {
                "jsonrpc": "2.0",
                "id": "ask-1",
                "method": "fs/read_text_file",
                "params": {"sessionId": sid, "path": os.environ.get("PROBE_ASK_PATH", "/etc/hostname")},
            }
        )
        asked.wait(30)
        text = json.dumps(answers.get("ask-1"))
    if "garbage" in MODE:
        with out_lock:
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
    reply = "x" * (16 * 1024 * 1024) if "big_line" in MODE else f"probe: {text}"
    if "slow" in MODE:
        cancelled.wait(30)
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "cancelled"}})
        return
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "probe-msg",
                    "content": {"type": "text", "text": reply},
                },
            },
        }
    )
    send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
