"""Run an ACP agent with one of its capabilities hidden from the client, so a test can make the
bridge take another path with a real agent (``session/load`` where the agent also offers
``session/resume``)::

    python hide_capability.py sessionCapabilities.resume -- codex-acp

Every line passes through unchanged, except the ``initialize`` result, from whose
``agentCapabilities`` the dotted key is removed. The agent runs as a child in the same process group
(the bridge stops the group); the proxy exits with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from typing import IO, Any


def hide(line: bytes, path: list[str]) -> bytes:
    try:
        message = json.loads(line)
    except ValueError:
        return line
    result = message.get("result") if isinstance(message, dict) else None
    caps: Any = result.get("agentCapabilities") if isinstance(result, dict) else None
    for key in path[:-1]:
        caps = caps.get(key) if isinstance(caps, dict) else None
    if not isinstance(caps, dict) or path[-1] not in caps:
        return line
    del caps[path[-1]]
    return json.dumps(message).encode() + b"\n"


def pump(source: IO[bytes], target: IO[bytes], path: list[str] | None) -> None:
    try:
        for line in iter(source.readline, b""):
            target.write(hide(line, path) if path else line)
            target.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    finally:
        try:
            target.close()
        except OSError:
            pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: hide_capability.py DOTTED.KEY -- COMMAND...")
    path = argv[0].split(".")
    command = [shutil.which(argv[2]) or argv[2], *argv[3:]]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, None), daemon=True).start()
    pump(child.stdout, sys.stdout.buffer, path)  # until the agent closes its output
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
