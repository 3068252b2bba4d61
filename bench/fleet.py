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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from .common import agents_file, bridge, percentile
from .streaming import _burst_once, _fanout, _last_sequence, _session


def _database(server: object) -> str:
    return server.new_database()  # type: ignore[attr-defined, no-any-return]


def burst_and_fanout(pg: object, runs: int, count: int, readers: int) -> None:
    print(f"burst: {runs} runs of a {count}-notification burst to one SSE reader; fan-out: one burst to {readers}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        agents = str(agents_file(Path(tmp)))
        url = _database(pg)
        sqlite = stack.enter_context(bridge(Path(tmp) / "sqlite", "--agents-file", agents))
        postgres = stack.enter_context(bridge(Path(tmp) / "pg-a", "--agents-file", agents, "--database-url", url))
        other = stack.enter_context(bridge(Path(tmp) / "pg-b", "--agents-file", agents, "--database-url", url))
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
        a = stack.enter_context(bridge(Path(tmp) / "a", "--database-url", url))
        b = stack.enter_context(bridge(Path(tmp) / "b", "--database-url", url))
        local, remote = asyncio.run(_latency(a.url, b.url, turns))
    print(
        f"latency POST -> turn.ended, reader on A (runs the agent): p50 {percentile(local, 50):.2f} ms, "
        f"p95 {percentile(local, 95):.2f} ms; reader on B: p50 {percentile(remote, 50):.2f} ms, "
        f"p95 {percentile(remote, 95):.2f} ms; B after A p50 "
        f"{statistics.median(r - x for r, x in zip(remote, local, strict=True)):.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.fleet", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args(argv)
    from tests.postgres import remove_postgres, start_postgres

    pg = start_postgres(durable=True)
    try:
        burst_and_fanout(pg, args.runs, args.count, args.readers)
        latency(pg, args.turns)
    finally:
        remove_postgres(pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
