"""The fleet benchmark: PostgreSQL next to SQLite, and latency from one bridge to a reader on another.

Run from the repository root (not part of the test suite; starts its own PostgreSQL server with
Debian's binaries, durable: fsync on, as a deployment would run it)::

    .venv/bin/python -m bench.fleet                       # everything, default sizes
    .venv/bin/python -m bench.fleet --runs 5 --count 10000 --readers 50 --turns 100

In one run, alternating between the stores:

- burst: a COUNT-notification burst from an agent to one SSE reader on the same bridge (events/s,
  lost, out of order), on SQLite and on PostgreSQL;
- fan-out: one burst to READERS SSE readers of one bridge, on both stores, and on PostgreSQL to
  readers of a second bridge (the message sent to it is forwarded to the runner);
- live latency: a turn posted to bridge A (mock agent), ``turn.ended`` read by an SSE reader on A
  and by one on bridge B (p50, p95), on one PostgreSQL database.

``load`` (``python -m bench.fleet load --bridges 3 --cap 10 --count 2000``) is the fleet at work:
BRIDGES bridges on one database, each at its session cap (CAP live sessions, one more is refused with
429), every session streaming a COUNT-chunk turn at once, each read by an SSE reader on another
bridge. It reports the events per second over all readers, the cross-bridge latency (from the
event's time, set by its runner, to its arrival at a reader of another bridge: p50, p99), the
database connections of each bridge (``pg_stat_activity`` by ``application_name``, sampled during the
load; at most ``PostgresBackend.READERS`` + 2 each), and what was lost (0: every reader got every
sequence once, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .common import agents_file, bridge, free_port, percentile
from .streaming import _burst_once, _fanout, _last_sequence, _session


def _database(server: object) -> str:
    return server.new_database()  # type: ignore[attr-defined, no-any-return]


def _member(url: str) -> tuple[str, ...]:
    """A fleet bridge's arguments: the database and an address of its own (every bridge of a fleet
    advertises its own; the port is chosen here so the address can be given)."""
    port = free_port()
    return ("--database-url", url, "--port", str(port), "--advertise-url", f"http://127.0.0.1:{port}")


def burst_and_fanout(pg: object, runs: int, count: int, readers: int) -> None:
    print(f"burst: {runs} runs of a {count}-notification burst to one SSE reader; fan-out: one burst to {readers}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        agents = str(agents_file(Path(tmp)))
        url = _database(pg)
        sqlite = stack.enter_context(bridge(Path(tmp) / "sqlite", "--agents-file", agents))
        postgres = stack.enter_context(bridge(Path(tmp) / "pg-a", "--agents-file", agents, *_member(url)))
        other = stack.enter_context(bridge(Path(tmp) / "pg-b", "--agents-file", agents, *_member(url)))
        servers = {"SQLite": sqlite, "PostgreSQL": postgres}
        rates: dict[str, list[float]] = {name: [] for name in servers}
        lost = dict.fromkeys(servers, 0)
        disorder = dict.fromkeys(servers, 0)
        for run in range(runs):
            names = list(servers) if run % 2 == 0 else list(reversed(servers))
            for name in names:
                with httpx.Client(base_url=servers[name].url, timeout=120) as client:
                    delivered, ordered, rate = _burst_once(client, f"burst-{run}", "burst", count)
                lost[name] += count - delivered
                disorder[name] += not ordered
                rates[name].append(rate)
                print(f"    run {run + 1:2d} {name}: {delivered}/{count} in order {ordered}, {rate:,.0f} events/s")
        for name in servers:
            print(
                f"burst {name}: median {statistics.median(rates[name]):,.0f} events/s "
                f"(min {min(rates[name]):,.0f}, max {max(rates[name]):,.0f}), lost {lost[name]}, "
                f"out of order {disorder[name]}"
            )
        targets = [
            ("SQLite", sqlite, sqlite),
            ("PostgreSQL", postgres, postgres),
            ("PostgreSQL, readers on B", postgres, other),
        ]
        for index, (name, runner, served) in enumerate(targets):
            sid = f"fanout-{index}"
            with httpx.Client(base_url=runner.url, timeout=60) as client:
                _session(client, sid, "burst")
                after = _last_sequence(client, sid)
            results, seconds = asyncio.run(_fanout(served.url, sid, after, readers, count))
            frames = sum(n for _, n in results)
            identical = len({digest for digest, _ in results}) == 1
            complete = all(n >= count for _, n in results)
            print(
                f"fan-out {name}: {len(results)} readers, {frames:,} frames in {seconds:.2f} s "
                f"({frames / seconds:,.0f} frames/s), complete {complete}, identical {identical}"
            )


async def _reader(
    url: str, sid: str, after: int, arrivals: dict[int, float], ready: asyncio.Event, changed: asyncio.Event
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=None) as client:
        async with client.stream("GET", f"/v1/sessions/{sid}/events/sse", params={"offset": after}) as response:
            ready.set()
            buffer = b""
            async for chunk in response.aiter_raw():
                buffer += chunk
                while b"\n\n" in buffer:
                    frame, buffer = buffer.split(b"\n\n", 1)
                    if b'"type":"turn.ended"' in frame:
                        sequence = int(frame.split(b"\n", 1)[0].split(b": ", 1)[1])
                        arrivals[sequence] = time.perf_counter()
                        changed.set()


async def _latency(a_url: str, b_url: str, turns: int) -> tuple[list[float], list[float]]:
    sid = "latency"
    async with httpx.AsyncClient(base_url=a_url, timeout=60) as client:
        (await client.post(f"/v1/sessions/{sid}", json={"agent": "mock"})).raise_for_status()
        after = len((await client.get(f"/v1/sessions/{sid}/events")).json()["events"])
        on_a: dict[int, float] = {}
        on_b: dict[int, float] = {}
        ready = [asyncio.Event(), asyncio.Event()]
        changed = asyncio.Event()
        tasks = [
            asyncio.create_task(_reader(a_url, sid, after, on_a, ready[0], changed)),
            asyncio.create_task(_reader(b_url, sid, after, on_b, ready[1], changed)),
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 30)
        local: list[float] = []
        remote: list[float] = []
        for turn in range(turns + 5):
            seen = len(on_a)
            t0 = time.perf_counter()
            (await client.post(f"/v1/sessions/{sid}/messages", json={"message": "hello"})).raise_for_status()
            async with asyncio.timeout(30):
                while len(on_a) <= seen or len(on_b) <= seen:
                    changed.clear()
                    await changed.wait()
            last = max(on_a)
            if turn >= 5:  # warm-up
                local.append((on_a[last] - t0) * 1000)
                remote.append((on_b[last] - t0) * 1000)
        for task in tasks:
            task.cancel()
        return local, remote


def latency(pg: object, turns: int) -> None:
    print(f"live latency: {turns} turns posted to bridge A; turn.ended read on A and on B (one database)")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        url = _database(pg)
        a = stack.enter_context(bridge(Path(tmp) / "a", *_member(url)))
        b = stack.enter_context(bridge(Path(tmp) / "b", *_member(url)))
        local, remote = asyncio.run(_latency(a.url, b.url, turns))
    print(
        f"latency POST -> turn.ended, reader on A (runs the agent): p50 {percentile(local, 50):.2f} ms, "
        f"p95 {percentile(local, 95):.2f} ms; reader on B: p50 {percentile(remote, 50):.2f} ms, "
        f"p95 {percentile(remote, 95):.2f} ms; B after A p50 "
        f"{statistics.median(r - x for r, x in zip(remote, local, strict=True)):.2f} ms"
    )


# ---- load: every bridge at its cap, every session streaming --------------------------------------
_FRAME_SEQ = re.compile(rb"^id: (\d+)$", re.M)
_FRAME_TIME = re.compile(rb'"time":"([^"]+)"')


@dataclass
class Stream:
    """What one cross-bridge reader saw: (arrival ns, complete frames) per network read."""

    session: str
    after: int
    reads: list[tuple[int, bytes]] = field(default_factory=list)
    done: bool = False


async def _stream(url: str, stream: Stream, ready: asyncio.Event, waiting: list[int], count: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=None) as client:
        path = f"/v1/sessions/{stream.session}/events/sse"
        async with client.stream("GET", path, params={"offset": stream.after}) as response:
            waiting[0] -= 1
            if waiting[0] == 0:
                ready.set()
            buffer = b""
            async for chunk in response.aiter_raw():
                now = time.time_ns()
                buffer += chunk
                end = buffer.rfind(b"\n\n")
                if end < 0:
                    continue
                complete, buffer = buffer[: end + 2], buffer[end + 2 :]
                stream.reads.append((now, complete))
                if b'"type":"turn.ended"' in complete:
                    stream.done = True
                    return


def _checked(stream: Stream, count: int) -> tuple[int, int, list[float]]:
    """(frames, lost or out of order, latencies in ms) of a reader's stream."""
    from app.events.envelope import stored_time_ns

    frames, bad, latencies = 0, 0, []
    expected = stream.after + 1
    deltas = 0
    for arrival, data in stream.reads:
        for frame in data.split(b"\n\n"):
            seq = _FRAME_SEQ.search(frame)
            if seq is None:
                continue
            sequence = int(seq.group(1))
            bad += sequence != expected
            expected = sequence + 1
            frames += 1
            deltas += b'"type":"item.delta"' in frame
            stamp = _FRAME_TIME.search(frame)
            if stamp is not None:
                event_ns = stored_time_ns('{"time":"' + stamp.group(1).decode() + '"}')
                latencies.append((arrival - event_ns) / 1e6)
    return frames, bad + max(count - deltas, 0) + (not stream.done), latencies


async def _sample_connections(database: str, names: list[str], peak: dict[str, int], stop: asyncio.Event) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        while not stop.is_set():
            rows = await (
                await conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " GROUP BY 1"
                )
            ).fetchall()
            for name, n in rows:
                if name in names:
                    peak[name] = max(peak.get(name, 0), int(n))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)


async def _load(urls: list[str], database: str, cap: int, count: int, size: int) -> None:
    sessions: dict[str, str] = {}  # id -> the runner's url
    async with httpx.AsyncClient(timeout=120) as client:
        for index, url in enumerate(urls):
            for n in range(cap):
                sid = f"load-{index}-{n}"
                (await client.post(f"{url}/v1/sessions/{sid}", json={"agent": "burst"})).raise_for_status()
                sessions[sid] = url
            refused = await client.post(f"{url}/v1/sessions/load-{index}-over", json={"agent": "burst"})
            assert refused.status_code == 429, f"bridge {url} is not at its cap: {refused.status_code}"
        afters = {}
        for sid, url in sessions.items():
            events = (await client.get(f"{url}/v1/sessions/{sid}/events")).json()["events"]
            afters[sid] = events[-1]["sequence"] if events else 0
        # Each session read on the next bridge: every event crosses the database to its reader.
        streams = [Stream(sid, afters[sid]) for sid in sessions]
        readers_at = {s.session: urls[(urls.index(sessions[s.session]) + 1) % len(urls)] for s in streams}
        ready, waiting = asyncio.Event(), [len(streams)]
        tasks = [asyncio.create_task(_stream(readers_at[s.session], s, ready, waiting, count)) for s in streams]
        await asyncio.wait_for(ready.wait(), 60)
        names = [f"acp-rest-bridge {url}" for url in urls]
        peak: dict[str, int] = {}
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample_connections(database, names, peak, stop))
        t0 = time.time_ns()
        await asyncio.gather(
            *(
                client.post(f"{url}/v1/sessions/{sid}/messages", json={"message": f"burst {count} {size}"})
                for sid, url in sessions.items()
            )
        )
        await asyncio.wait_for(asyncio.gather(*tasks), 600)
        stop.set()
        await sampler
    frames = lost = 0
    latencies: list[float] = []
    last = t0
    for stream in streams:
        f, bad, lat = _checked(stream, count)
        frames += f
        lost += bad
        latencies += lat
        last = max(last, stream.reads[-1][0])
    seconds = (last - t0) / 1e9
    print(
        f"load: {len(urls)} bridges x {cap} sessions (each bridge at its cap), {len(streams)} turns of {count} "
        f"chunks streaming at once, each read on another bridge: {frames:,} events in {seconds:.1f} s = "
        f"{frames / seconds:,.0f} events/s; cross-bridge latency p50 {percentile(latencies, 50):.0f} ms, "
        f"p99 {percentile(latencies, 99):.0f} ms; lost or out of order {lost}"
    )
    from app.events.postgres import PostgresBackend

    bound = PostgresBackend.READERS + 2
    print(
        "database connections per bridge (peak): "
        + ", ".join(f"{name.split()[-1]} {peak.get(name, 0)}" for name in names)
        + f" (bound: {bound})"
    )


def load(pg: object, bridges: int, cap: int, count: int, size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        agents = str(agents_file(Path(tmp)))
        url = _database(pg)
        servers = [
            stack.enter_context(
                bridge(
                    Path(tmp) / f"b{n}",
                    "--agents-file",
                    agents,
                    *_member(url),
                    env={"ACP_BRIDGE_MAX_SESSIONS": str(cap), "ACP_BRIDGE_LOG_LEVEL": "error"},
                )
            )
            for n in range(bridges)
        ]
        asyncio.run(_load([s.url for s in servers], url, cap, count, size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.fleet", description=__doc__)
    parser.add_argument("what", nargs="?", choices=("all", "load"), default="all")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--bridges", type=int, default=3)
    parser.add_argument("--cap", type=int, default=10, help="load: live sessions per bridge (its session cap)")
    parser.add_argument("--size", type=int, default=64, help="load: characters per chunk")
    args = parser.parse_args(argv)
    from tests.postgres import remove_postgres, start_postgres

    pg = start_postgres(durable=True)
    try:
        if args.what == "load":
            load(pg, args.bridges, args.cap, args.count, args.size)
        else:
            burst_and_fanout(pg, args.runs, args.count, args.readers)
            latency(pg, args.turns)
    finally:
        remove_postgres(pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
