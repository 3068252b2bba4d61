"""Readers that never read, each pipelining hundreds of requests in one write, against a bridge
with a token: its connections' memory is bounded and given back, and an authenticated client's
round trips and new SSE streams keep working throughout.

Each attacking connection sets a small receive buffer (``SO_RCVBUF`` 4096), sends ``--pipelined``
``GET /openapi.json`` requests in one write and never reads; ``--connections`` of them are held for
``--hold`` seconds against a server capped at ``--cap`` connections (fewer than the attackers, so
new clients get in only by the cap closing connections whose reader takes nothing). Meanwhile a
client with the token makes a round trip on a new connection every second and opens a new SSE
stream (a message's events up to its ``turn.ended``) every few seconds. Then the attackers leave,
and the server's RSS is read ``--after`` seconds later.

    .venv/bin/python -m bench.pipelined_readers [--connections 2100] [--pipelined 400] [--hold 60] [--after 30]

``tests/e2e/test_connections.py`` runs the same ``flood`` and ``probe`` at a smaller scale.
"""

from __future__ import annotations

import argparse
import resource
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .common import bridge

REQUEST = b"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
RSS_LIMIT_MB = 300.0
GIVEN_BACK_MB = 50.0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < needed:
        raise RuntimeError(f"the open-file hard limit ({hard}) is below the {needed} sockets needed")


@contextmanager
def flood(port: int, connections: int, pipelined: int) -> Iterator[list[socket.socket]]:
    """``connections`` sockets, each with ``pipelined`` requests sent in one write and nothing read,
    held open until the block ends (a socket the server refused or closed stays as it is)."""
    burst = REQUEST * pipelined
    socks: list[socket.socket] = []
    try:
        for _ in range(connections):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            try:
                sock.connect(("127.0.0.1", port))
                sock.settimeout(0)
                sock.send(burst)  # one write; what the kernel does not take now is not sent again
            except OSError:
                pass  # reset at the cap (its waiting room full)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


@dataclass
class Probe:
    """What the authenticated client saw while the flood was on."""

    round_trips: int = 0
    streams: int = 0
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0
    peak_mb: float = 0.0


def probe(
    url: str, token: str, pid: int, session_id: str, until: Callable[[], bool], stream_every: float = 5.0
) -> Probe:
    """Round trips (each on a new connection), and every ``stream_every`` seconds a new SSE stream
    of a message's events, until ``until()``; the server's RSS sampled after each."""
    seen = Probe()
    headers = {"Authorization": f"Bearer {token}"}
    next_stream = 0.0
    while not until():
        started = time.monotonic()
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
                response = client.get("/v1/sessions")
                if response.status_code != 200:
                    raise RuntimeError(f"GET /v1/sessions answered {response.status_code}")
                seen.round_trips += 1
                if started >= next_stream:
                    next_stream = started + stream_every
                    listed = {s["sessionId"]: s for s in response.json()["sessions"]}
                    stream_turn(client, session_id, listed[session_id]["eventCount"])
                    seen.streams += 1
        except (httpx.HTTPError, RuntimeError) as exc:
            seen.failures.append(f"{type(exc).__name__}: {exc}")
        seen.slowest = max(seen.slowest, time.monotonic() - started)
        seen.peak_mb = max(seen.peak_mb, rss_mb(pid))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return seen


def stream_turn(client: httpx.Client, session_id: str, offset: int = 0) -> None:
    """A new SSE stream (of the events after ``offset``) read up to the ``turn.ended`` of a new message."""
    with client.stream("GET", f"/v1/sessions/{session_id}/events/sse", params={"offset": offset}) as stream:
        response = client.post(f"/v1/sessions/{session_id}/messages", json={"message": "Reply with OK."})
        if response.status_code != 204:
            raise RuntimeError(f"message answered {response.status_code}")
        deadline = time.monotonic() + 10
        for line in stream.iter_lines():
            if '"type":"turn.ended"' in line:
                return
            if time.monotonic() > deadline:
                break
    raise RuntimeError("no turn.ended on a new SSE stream within 10 s")


@dataclass
class Result:
    before_mb: float
    peak_mb: float
    after_mb: float
    probe: Probe
    seconds: float

    def ok(self) -> bool:
        return (
            not self.probe.failures
            and self.probe.streams > 0
            and self.peak_mb < RSS_LIMIT_MB
            and self.after_mb - self.before_mb <= GIVEN_BACK_MB
        )


def attack(
    url: str, token: str, pid: int, session_id: str, connections: int, pipelined: int, hold: float, after: float
) -> Result:
    """The flood held ``hold`` seconds while the client probes; RSS ``after`` seconds after it left."""
    port = int(url.rsplit(":", 1)[1])
    before = rss_mb(pid)
    started = time.monotonic()
    result: list[Probe] = []
    stop = threading.Event()
    with flood(port, connections, pipelined):
        thread = threading.Thread(target=lambda: result.append(probe(url, token, pid, session_id, stop.is_set)))
        thread.start()
        stop.wait(max(0.0, hold - (time.monotonic() - started)))
        stop.set()
        thread.join(60)
    seconds = time.monotonic() - started
    time.sleep(after)
    seen = result[0] if result else Probe(failures=["the probe did not finish"])
    return Result(before, max(seen.peak_mb, rss_mb(pid)), rss_mb(pid), seen, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=2100)
    parser.add_argument("--pipelined", type=int, default=400)
    parser.add_argument("--hold", type=float, default=60.0)
    parser.add_argument("--after", type=float, default=30.0)
    parser.add_argument("--cap", type=int, default=2000)
    args = parser.parse_args()
    raise_open_files(args.connections + 200)
    token = "t" * 48
    env = {"ACP_BRIDGE_MAX_CONNECTIONS": str(args.cap), "ACP_BRIDGE_LOG_LEVEL": "warning"}
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data", "--token", token, env=env, lines=lines) as s:
        with httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            assert client.post("/v1/sessions/probe", json={"agent": "mock"}).status_code == 200
            stream_turn(client, "probe")
            assert client.get("/openapi.json").status_code == 200
        print(
            f"pipelined readers: {args.connections} connections x {args.pipelined} GET /openapi.json, "
            f"held {args.hold:g} s against a cap of {args.cap}, RSS read {args.after:g} s after they left"
        )
        result = attack(s.url, token, s.proc.pid, "probe", args.connections, args.pipelined, args.hold, args.after)
    seen = result.probe
    print(
        f"    authenticated client: {seen.round_trips} round trips, {seen.streams} new SSE streams, "
        f"slowest {seen.slowest:.2f} s, {len(seen.failures)} failures {seen.failures[:3]}"
    )
    for line in lines:
        if "acp_rest_bridge.connections" in line:
            print("    log: " + line.strip())
    print(
        f"pipelined readers result: RSS {result.before_mb:.0f} MB before, peak {result.peak_mb:.0f} MB "
        f"(limit {RSS_LIMIT_MB:.0f}), {result.after_mb:.0f} MB {args.after:g} s after "
        f"({result.after_mb - result.before_mb:+.0f} MB, limit +{GIVEN_BACK_MB:.0f}) -> "
        f"{'OK' if result.ok() else 'MISSED'}"
    )
    sys.exit(0 if result.ok() else 1)


if __name__ == "__main__":
    main()
