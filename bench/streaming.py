"""Streaming benchmarks: burst throughput, turn latency, SSE fan-out, idle memory, start-up time.

Run from the repository root (not part of the test suite)::

    .venv/bin/python -m bench.streaming all          # everything, default sizes
    .venv/bin/python -m bench.streaming burst --runs 20 --count 10000
    .venv/bin/python -m bench.streaming latency --turns 300
    .venv/bin/python -m bench.streaming fanout --readers 100 --count 10000
    .venv/bin/python -m bench.streaming memory --sessions 20 200
    .venv/bin/python -m bench.streaming startup --runs 5

Each prints one line per figure and checks its target, so a regression is visible at a glance.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .common import (
    BURST_AGENT,
    MOCK_AGENT,
    ROOT,
    RawHTTP,
    StdioAgent,
    agents_file,
    bridge,
    parse_sse_frames,
    percentile,
)

OK_PROMPT = "Reply with exactly the single word OK."


def _session(client: httpx.Client, session_id: str, agent: str = "mock") -> None:
    response = client.post(f"/v1/sessions/{session_id}", json={"agent": agent})
    response.raise_for_status()


def _last_sequence(client: httpx.Client, session_id: str) -> int:
    events = client.get(f"/v1/sessions/{session_id}/events").json()["events"]
    return int(events[-1]["sequence"]) if events else 0


# ---- (a) burst ------------------------------------------------------------------------------------
def _read_burst(response: httpx.Response, count: int, t0: float) -> tuple[bytes, float]:
    """Collects the SSE body until ``count`` deltas and the turn's end have arrived; parsing waits
    until the clock has stopped, so the reader costs the machine as little as possible."""
    body = bytearray()
    deltas = Counter(b'"type":"item.delta"')
    ended = Counter(b'"type":"turn.ended"')
    t_last = t0
    for chunk in response.iter_raw():
        body += chunk
        if deltas.total < count and deltas.feed(body) >= count:
            t_last = time.perf_counter()
        if ended.feed(body):
            return bytes(body), t_last
    raise AssertionError("stream ended early")


class Counter:
    """Counts a marker in a growing buffer, also where it straddles two network reads."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.total = 0
        self._pos = 0

    def feed(self, buffer: bytes | bytearray) -> int:
        self.total += buffer.count(self.marker, self._pos)
        # Whatever starts before this point was complete and is counted.
        self._pos = max(self._pos, len(buffer) - len(self.marker) + 1)
        return self.total

    def drop_counted(self, buffer: bytearray) -> None:
        """Free what is counted, keeping the bytes a marker could still straddle."""
        keep = len(self.marker) - 1
        del buffer[: max(0, len(buffer) - keep)]
        self._pos = 0


def _check_burst(body: bytes, after: int, count: int) -> tuple[int, bool]:
    """Deltas delivered (by index, in order) and whether the frames were contiguous and in order."""
    evs = parse_sse_frames(body.decode())
    contiguous = [e["sequence"] for e in evs] == list(range(after + 1, after + 1 + len(evs)))
    indices = [int(e["data"]["delta"][:8]) for e in evs if e["type"] == "item.delta"]
    return len(indices), contiguous and indices == list(range(count))


def burst(runs: int, count: int, agent: str) -> bool:
    """A COUNT-notification burst from an agent process to one SSE reader, RUNS times, next to the
    same burst read straight from the agent's stdout."""
    argv = BURST_AGENT if agent == "burst" else MOCK_AGENT
    print(f"(a) burst: {runs} runs of a {count}-notification burst from the {agent} agent to one SSE reader")
    stdio = StdioAgent(argv)
    direct_rates = []
    for _ in range(3):
        received, seconds = stdio.prompt_counting(f"burst {count}")
        assert received == count, received
        direct_rates.append(count / seconds)
    stdio.close()
    direct = statistics.median(direct_rates)
    print(f"    the agent read directly over stdio: {count} notifications at {direct:,.0f}/s (median of 3)")

    lost_total = 0
    disorder = 0
    rates = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        bridge(Path(tmp) / "data", "--agents-file", str(agents_file(Path(tmp)))) as server,
    ):
        client = httpx.Client(base_url=server.url, timeout=60)
        for run in range(runs):
            sid = f"burst-{run}"
            _session(client, sid, agent)
            after = _last_sequence(client, sid)
            with client.stream("GET", f"/v1/sessions/{sid}/events/sse", params={"offset": after}) as response:
                t0 = time.perf_counter()
                client.post(f"/v1/sessions/{sid}/messages", json={"message": f"burst {count}"}).raise_for_status()
                body, t_last = _read_burst(response, count, t0)
            delivered, ordered = _check_burst(body, after, count)
            lost_total += count - delivered
            disorder += not ordered
            rate = delivered / (t_last - t0)
            rates.append(rate)
            print(f"    run {run + 1:2d}: delivered {delivered}/{count}, in order: {ordered}, {rate:,.0f} events/s")
        client.close()
    median = statistics.median(rates)
    ok = lost_total == 0 and disorder == 0 and median >= 40_000
    print(
        f"(a) result: lost {lost_total} over {runs} runs, out of order {disorder}; delivered rate median "
        f"{median:,.0f}/s (min {min(rates):,.0f}, max {max(rates):,.0f}); agent over stdio {direct:,.0f}/s "
        f"-> {'OK' if ok else 'MISSED'} (target 0 lost, >= 40,000/s)"
    )
    return ok


# ---- (b) latency ----------------------------------------------------------------------------------
async def _latency_samples(url: str, turns: int, warmup: int) -> list[float]:
    """One event loop for both the POSTs and the SSE reader (no thread handovers in the client)."""
    samples: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        (await client.post("/v1/sessions/latency", json={"agent": "mock"})).raise_for_status()
        async with client.stream("GET", "/v1/sessions/latency/events/sse", params={"offset": 1}) as response:
            chunks = response.aiter_raw()
            ended = Counter(b'"type":"turn.ended"')
            body = bytearray()
            for index in range(turns + warmup):
                t0 = time.perf_counter()
                posted = asyncio.ensure_future(
                    client.post("/v1/sessions/latency/messages", json={"message": OK_PROMPT})
                )
                async for chunk in chunks:
                    body += chunk
                    if ended.feed(body) > index:
                        break
                ended.drop_counted(body)
                at = time.perf_counter()
                assert (await posted).status_code == 204
                if index >= warmup:
                    samples.append((at - t0) * 1000)
    return samples


def _latency_raw(url: str, turns: int, warmup: int) -> list[float]:
    """The same turns with a plain-socket client (``RawHTTP``): what the bridge itself takes."""
    samples: list[float] = []
    control, stream = RawHTTP(url), RawHTTP(url)
    try:
        status, _ = control.request("POST", "/v1/sessions/latency-raw", {"agent": "mock"})
        assert status == 200, status
        stream.open_stream("/v1/sessions/latency-raw/events/sse?offset=1")
        for index in range(turns + warmup):
            t0 = time.perf_counter()
            control.send("POST", "/v1/sessions/latency-raw/messages", {"message": OK_PROMPT})
            stream.read_until(b'"type":"turn.ended"')
            at = time.perf_counter()
            assert control.response()[0] == 204
            if index >= warmup:
                samples.append((at - t0) * 1000)
    finally:
        control.close()
        stream.close()
    return samples


def latency(turns: int) -> bool:
    """POST a trivial message (the mock's OK prompt) -> its turn.ended seen on an open SSE stream.
    Measured with a plain-socket client (the target), and with httpx's AsyncClient for reference."""
    print(f"(b) latency: {turns} trivial turns (POST message -> turn.ended on SSE), mock agent")
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
        raw = _latency_raw(server.url, turns, 20)
        with_httpx = asyncio.run(_latency_samples(server.url, turns, 20))
    p50, p99 = percentile(raw, 50), percentile(raw, 99)
    ok = p50 <= 2.0
    print(
        f"    the same with httpx.AsyncClient as the client: p50 {percentile(with_httpx, 50):.2f} ms, "
        f"p99 {percentile(with_httpx, 99):.2f} ms"
    )
    print(
        f"(b) result: p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean {statistics.mean(raw):.2f} ms "
        f"-> {'OK' if ok else 'MISSED'} (target p50 <= 2 ms)"
    )
    return ok


# ---- (c) fan-out ----------------------------------------------------------------------------------
_ID = re.compile(rb"^id: (\d+)$", re.M)


async def _fanout_reader(url: str, sid: str, after: int, ready: asyncio.Event, total: list[int]) -> tuple[str, int]:
    """Reads until turn.ended; returns (sha256 of the frames, frame count); checks the ids."""
    digest = hashlib.sha256()
    frames = 0
    last = after
    async with httpx.AsyncClient(base_url=url, timeout=None) as client:
        async with client.stream("GET", f"/v1/sessions/{sid}/events/sse", params={"offset": after}) as response:
            total[0] += 1
            if total[0] == total[1]:
                ready.set()
            buffer = b""
            async for chunk in response.aiter_raw():
                buffer += chunk
                end = buffer.rfind(b"\n\n")
                if end < 0:
                    continue
                complete, buffer = buffer[: end + 2], buffer[end + 2 :]
                digest.update(complete)
                for match in _ID.finditer(complete):
                    sequence = int(match.group(1))
                    assert sequence == last + 1, (sequence, last)
                    last = sequence
                    frames += 1
                if b'"type":"turn.ended"' in complete:
                    return digest.hexdigest(), frames
    raise AssertionError("stream ended early")


async def _fanout(url: str, sid: str, after: int, readers: int, count: int) -> tuple[list[tuple[str, int]], float]:
    ready = asyncio.Event()
    total = [0, readers]
    tasks = [asyncio.create_task(_fanout_reader(url, sid, after, ready, total)) for _ in range(readers)]
    await asyncio.wait_for(ready.wait(), 30)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url) as client:
        (await client.post(f"/v1/sessions/{sid}/messages", json={"message": f"burst {count}"})).raise_for_status()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 300)
    return results, time.perf_counter() - t0


def fanout(readers: int, count: int) -> bool:
    print(f"(c) fan-out: {readers} SSE readers on one session, {count}-notification burst")
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            _session(client, "fanout")
            after = _last_sequence(client, "fanout")
        results, seconds = asyncio.run(_fanout(server.url, "fanout", after, readers, count))
    digests = {digest for digest, _ in results}
    frames = {n for _, n in results}
    complete = all(n >= count for _, n in results)
    ok = len(digests) == 1 and complete
    delivered = sum(n for _, n in results)
    print(
        f"(c) result: {len(results)} readers, frames per reader {sorted(frames)}, identical={len(digests) == 1}, "
        f"{delivered:,} frames in {seconds:.2f} s ({delivered / seconds:,.0f} frames/s overall) "
        f"-> {'OK' if ok else 'MISSED'} (target all complete and identical)"
    )
    return ok


# ---- (d) memory -----------------------------------------------------------------------------------
def memory(steps: list[int]) -> bool:
    print(f"(d) memory: bridge RSS idle and with {', '.join(map(str, steps))} idle mock sessions (agents excluded)")
    with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            # One request of each kind first, so lazily imported code is counted as idle.
            _session(client, "warm")
            client.post("/v1/sessions/warm/messages", json={"message": OK_PROMPT})
            client.get("/v1/sessions/warm/events")
            client.post("/v1/sessions/warm/terminate")
            time.sleep(0.5)
            idle = server.rss_kib() / 1024
            print(f"    idle: {idle:.1f} MB")
            created = 0
            figures = []
            for target in steps:
                while created < target:
                    sid = f"idle-{created}"
                    _session(client, sid)
                    client.post(f"/v1/sessions/{sid}/messages", json={"message": OK_PROMPT})
                    created += 1
                time.sleep(1.0)
                rss = server.rss_kib() / 1024
                per = (rss - idle) / target
                figures.append(per)
                print(f"    {target} idle sessions: {rss:.1f} MB ({per:.3f} MB per session)")
    ok = idle <= 60 and all(per <= 0.5 for per in figures)
    print(
        f"(d) result: idle {idle:.1f} MB, per session {max(figures):.3f} MB "
        f"-> {'OK' if ok else 'MISSED'} (target <= 60 MB idle, <= 0.5 MB per idle session)"
    )
    return ok


# ---- (e) start-up -----------------------------------------------------------------------------------
def startup(runs: int) -> bool:
    print(f"(e) start-up: spawn -> first healthy /v1/health, {runs} runs")
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp, bridge(Path(tmp) / "data") as server:
            times.append(server.started_s * 1000)

    def import_ms(code: str) -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
            best = min(best, (time.perf_counter() - t0) * 1000)
        return best

    bare = import_ms("pass")
    web = import_ms("import fastapi, uvicorn") - bare
    sdk = import_ms("import app.acp.sdk") - bare
    app = import_ms("import app.main") - bare
    print(
        f"(e) result: start-up median {statistics.median(times):.0f} ms (min {min(times):.0f}, max {max(times):.0f}); "
        f"importing the whole app {app:.0f} ms, of which FastAPI/uvicorn {web:.0f} ms, the parts of "
        f"the ACP SDK in use {sdk:.0f} ms (interpreter alone {bare:.0f} ms)"
    )
    return True


# ---- (f) growth ---------------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def growth(count: int, per_burst: int) -> bool:
    """One session grown to COUNT events through a real bridge (bursts of PER_BURST chunks from the
    burst agent), with an SSE reader following along: the bridge's RSS must stay flat."""
    per_burst = min(per_burst, count)
    print(f"(f) growth: one session to {count:,} events in bursts of {per_burst:,}, bridge RSS after each")
    samples = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        bridge(Path(tmp) / "data", "--agents-file", str(agents_file(Path(tmp)))) as server,
    ):
        client = httpx.Client(base_url=server.url, timeout=300)
        _session(client, "growth", "burst")
        after = _last_sequence(client, "growth")
        t0 = time.perf_counter()
        with client.stream("GET", "/v1/sessions/growth/events/sse", params={"offset": after}) as response:
            chunks = response.iter_raw()
            ended = Counter(b'"type":"turn.ended"')
            body = bytearray()
            for index in range(count // per_burst):
                client.post("/v1/sessions/growth/messages", json={"message": f"burst {per_burst}"}).raise_for_status()
                for chunk in chunks:
                    body += chunk
                    if ended.feed(body) > index:
                        break
                ended.drop_counted(body)
                samples.append(server.rss_kib() / 1024)
                if (index + 1) % max(1, count // per_burst // 10) == 0:
                    total = _last_sequence_cheap(client, "growth")
                    print(f"    {total:>9,} events: bridge RSS {samples[-1]:.1f} MB")
        seconds = time.perf_counter() - t0
        db_mb = sum(f.stat().st_size for f in (Path(tmp) / "data").iterdir()) / 1e6
        client.close()
    # The first bursts set the working set (the writer's backlog, a completed 10,000-chunk item and
    # its frames, the allocator's arenas); flat means no climb from there to the end.
    settled = max(samples[: max(2, len(samples) // 10)])
    grown = samples[-1] - settled
    ok = grown < 5
    print(
        f"(f) result: bridge RSS {samples[0]:.1f} MB after the first burst, {settled:.1f} MB at most over the "
        f"first tenth of the run, {samples[-1]:.1f} MB at the end ({grown:+.1f} MB); {count / seconds:,.0f} events/s "
        f"end to end; data dir {db_mb:.0f} MB -> {'OK' if ok else 'MISSED'} (target: flat, under +5 MB from the "
        "first tenth to the end)"
    )
    return ok


def _last_sequence_cheap(client: httpx.Client, session_id: str) -> int:
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == session_id)
    return int(info["eventCount"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__)
    sub = parser.add_subparsers(dest="bench", required=True)
    p = sub.add_parser("burst")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--agent", choices=["burst", "mock"], default="burst")
    p = sub.add_parser("latency")
    p.add_argument("--turns", type=int, default=300)
    p = sub.add_parser("fanout")
    p.add_argument("--readers", type=int, default=100)
    p.add_argument("--count", type=int, default=10_000)
    p = sub.add_parser("memory")
    p.add_argument("--sessions", type=int, nargs="+", default=[20, 200])
    p = sub.add_parser("startup")
    p.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("growth")
    p.add_argument("--count", type=int, default=1_000_000)
    p.add_argument("--burst", type=int, default=10_000, help="chunks per message")
    sub.add_parser("all")
    args = parser.parse_args(argv)
    results: list[bool] = []
    if args.bench in ("burst", "all"):
        results.append(
            burst(getattr(args, "runs", 20), getattr(args, "count", 10_000), getattr(args, "agent", "burst"))
        )
    if args.bench in ("latency", "all"):
        results.append(latency(getattr(args, "turns", 300)))
    if args.bench in ("fanout", "all"):
        results.append(fanout(getattr(args, "readers", 100), getattr(args, "count", 10_000)))
    if args.bench in ("memory", "all"):
        results.append(memory(getattr(args, "sessions", [20, 200])))
    if args.bench in ("startup", "all"):
        results.append(startup(getattr(args, "runs", 5)))
    if args.bench in ("growth", "all"):
        results.append(growth(getattr(args, "count", 1_000_000), getattr(args, "burst", 10_000)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
