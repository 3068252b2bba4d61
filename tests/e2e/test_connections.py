"""Connections cannot lock clients out: a real server on 127.0.0.1 under 2,000 idle and slowloris
connections, or hundreds of readers that pipeline requests and never read, keeps serving an
authenticated client; request heads, bodies and writes have deadlines; pipelined requests are
answered in order however many come in one write; an SSE reader that stops reading has its socket
closed at the send timeout; the open-file limit is raised."""

from __future__ import annotations

import json
import resource
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bench.pipelined_readers import attack as pipelined_attack
from bench.pipelined_readers import raise_open_files
from tests.e2e.test_streaming import StalledReader
from tests.support import Bridge, create_session, iter_sse, send, start_bridge, wait_until

TOKEN = "t" * 48
# Runs the bridge with the soft open-file limit lowered to 1,024, as many systems start it.
LOW_NOFILE = [
    sys.executable,
    "-c",
    "import os, resource, sys; hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard)); os.execv(sys.argv[1], sys.argv[1:])",
]


def open_file_limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit in /proc/<pid>/limits")


@contextmanager
def attack(port: int, idle: int, slow: int) -> Iterator[list[socket.socket]]:
    """``idle`` connections that send nothing and ``slow`` ones that send a request head a few bytes
    a second and never finish it (slowloris), held open until the block ends."""
    socks: list[socket.socket] = []
    stop = threading.Event()
    for index in range(idle + slow):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
        if index >= idle:
            try:
                sock.send(b"GET /v1/sessions HTTP/1.1\r\n")
            except OSError:
                pass  # refused or not connected yet: it stays an idle one

    def trickle() -> None:
        while not stop.wait(1.0):
            for sock in socks[idle:]:
                try:
                    sock.send(b"X-a: b\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield socks
    finally:
        stop.set()
        thread.join(5)
        for sock in socks:
            sock.close()


def test_two_thousand_idle_and_slowloris_connections_do_not_lock_out_a_client(tmp_path: Path) -> None:
    # The test process opens 2,000 sockets itself.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 2500, "the open-file hard limit is below 2,500"
    server = start_bridge(
        tmp_path,
        token=TOKEN,
        wrapper=LOW_NOFILE,
        env={"ACP_BRIDGE_MAX_CONNECTIONS": "1500", "ACP_BRIDGE_HEADER_TIMEOUT": "60"},
    )
    try:
        soft_limit, hard_limit = open_file_limits(server.proc.pid)
        assert soft_limit == hard_limit  # raised at start
        port = server.port
        started = time.monotonic()
        with attack(port, idle=1000, slow=1000):
            assert wait_until(lambda: "at the cap of 1500" in server.log(), 30), server.log()
            # New connections wait (a quarter of the cap of them; more are reset) while every open one
            # is younger than a second; from then on the longest idle one makes room for each new one.
            assert wait_until(lambda: healthy(server.url), 10)
            # An authenticated client's round trips, on new connections, and a new SSE stream.
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as api:
                create_session(api, "under-attack")
                for _ in range(20):
                    assert api.get("/v1/sessions").status_code == 200
                with (
                    httpx.Client(base_url=server.url, headers=api.headers, timeout=10) as sse,
                    sse.stream("GET", "/v1/sessions/under-attack/events/sse") as stream,
                ):
                    send(api, "under-attack", "Reply with exactly the single word OK.")
                    seen = []
                    for event in iter_sse(stream, deadline=time.monotonic() + 20):
                        seen.append(event["type"])
                        if event["type"] == "turn.ended":
                            break
                    assert "turn.ended" in seen, seen
                assert httpx.get(server.url + "/v1/health", timeout=10).status_code == 200
            assert time.monotonic() - started < 60
        line = next(line for line in server.log().splitlines() if "at the cap of 1500" in line)
        assert line.startswith("WARNING") and "ACP_BRIDGE_MAX_CONNECTIONS" in line
    finally:
        server.stop()


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/v1/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closed the connection within ``timeout`` (data it sent is read and dropped)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def test_a_request_head_and_a_stalled_body_have_deadlines(tmp_path: Path) -> None:
    server = start_bridge(tmp_path, env={"ACP_BRIDGE_HEADER_TIMEOUT": "1", "ACP_BRIDGE_BODY_TIMEOUT": "1"})
    port = server.port
    try:
        idle = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        stalled = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        slow.sendall(b"GET /v1/health HTTP/1.1\r\n")
        body = json.dumps({"agent": "mock"}).encode()
        head = f"POST /v1/sessions/b HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
        stalled.sendall(head.encode() + b"Content-Type: application/json\r\n\r\n" + body[:5])
        for _ in range(4):  # a byte now and then does not keep a head alive
            slow.sendall(b"X")
            time.sleep(0.2)
        assert closed_by_server(idle, 5) and closed_by_server(slow, 5) and closed_by_server(stalled, 5)
        assert time.monotonic() - started < 5
        # A client that sends its request in time is served, also after a pause on a kept-alive connection.
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/v1/health").status_code == 200
            time.sleep(0.5)
            assert client.get("/v1/health").status_code == 200
        assert wait_until(lambda: "without a complete request head in 1 s" in server.log(), 15)
        assert wait_until(lambda: "request body stalled for 1 s" in server.log(), 15)
    finally:
        server.stop()


def server_side_established(port: int, client_port: int) -> bool:
    """Whether the server's end of the connection from ``client_port`` is still open (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client_port:
            return state in ("01", "08")  # ESTABLISHED, CLOSE_WAIT
    return False


def test_an_sse_reader_that_stops_reading_is_closed_at_the_send_timeout(tmp_path: Path) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.fail("/proc/net/tcp is needed to see the server's end of a connection")
    server = start_bridge(tmp_path, env={"ACP_BRIDGE_SSE_SEND_TIMEOUT": "1"})
    port = server.port
    try:
        client = server.client()
        create_session(client, "stalled")
        dead = StalledReader(server.url, "/v1/sessions/stalled/events/sse")
        client_port = dead.sock.getsockname()[1]
        assert wait_until(lambda: server_side_established(port, client_port), 10)
        send(client, "stalled", "burst 20000 256")
        assert wait_until(lambda: "dropped: it accepted no data" in server.log(), 30)
        dropped = time.monotonic()
        # The reader still reads nothing: the server's end is gone at once, not when it would read.
        assert wait_until(lambda: not server_side_established(port, client_port), 3)
        assert time.monotonic() - dropped < 3
        dead.close()
    finally:
        server.stop()


def test_readers_that_pipeline_requests_and_never_read_are_bounded_and_closed(tmp_path: Path) -> None:
    """bench/pipelined_readers.py at a smaller scale (its full run: 2,100 connections x 400 for 60 s):
    600 connections each send 400 ``GET /openapi.json`` in one write and never read, against a cap of
    500 with a 3 s write timeout. The authenticated client's round trips and new SSE streams work
    throughout, the server's RSS stays bounded and goes back down, and the log says what was closed."""
    raise_open_files(1000)
    server = start_bridge(
        tmp_path,
        token=TOKEN,
        env={"ACP_BRIDGE_MAX_CONNECTIONS": "500", "ACP_BRIDGE_WRITE_TIMEOUT": "3"},
    )
    try:
        api = server.client()
        create_session(api, "probe")
        assert api.get("/openapi.json").status_code == 200
        result = pipelined_attack(server.url, TOKEN, server.proc.pid, "probe", 600, 400, hold=8, after=5)
        seen = result.probe
        assert not seen.failures and seen.round_trips >= 5 and seen.streams >= 1, seen
        # Each connection holds at most 4 parsed requests and one answer: ~40 KB, not megabytes.
        assert result.peak_mb - result.before_mb < 100, result
        assert result.after_mb - result.before_mb < 50, result
        assert wait_until(lambda: "whose reader took nothing for 3 s" in server.log(), 15), server.log()
        assert "closed to make room at the cap" in server.log()
    finally:
        server.stop()


def test_pipelined_requests_are_answered_in_order(bridge: Bridge) -> None:
    """300 requests in one write (most of them held unparsed while 4 wait), bodies included: every
    one is answered, in order, on the one connection."""
    count = 300
    requests = []
    for index in range(count):
        if index % 50 == 7:
            body = json.dumps({"agent": "nope"}).encode()
            head = f"POST /v1/sessions/p-{index} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            requests.append(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        else:
            requests.append(f"GET /v1/sessions/p-{index}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    with socket.create_connection(("127.0.0.1", bridge.port), timeout=20) as sock:
        sock.sendall(b"".join(requests))
        received = b""
        while received.count(b"HTTP/1.1 ") < count or not received.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, f"closed after {received.count(b'HTTP/1.1 ')} answers"
            received += chunk
    ids = [int(part.split(b'"', 1)[0]) for part in received.split(b": p-")[1:]]
    assert ids == [i for i in range(count) if i % 50 != 7], ids[:20]  # the creates' 400 names no id
    assert received.count(b"unsupported_agent") == count // 50
