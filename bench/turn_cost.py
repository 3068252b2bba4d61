"""What one turn costs the event store, counted (not timed): statements the store's connections run,
and hand-offs between threads (the event loop waking the writer, the writer's notices to the loop,
reads sent to the reader pool). A whole server in this process (``create_app``, its lifespan), the
mock agent, ``POST .../messages/stream`` per turn.

    .venv/bin/python -m bench.turn_cost [--turns 50] [--postgres]

It counts through the standard library and psycopg (``sqlite3.connect``, ``SimpleQueue``,
``call_soon_threadsafe``, ``Executor.submit``), not through the store's own names, so the same
file counts any version of the store (copied into another source tree and run there).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import queue
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

OK_PROMPT = "Reply with exactly the single word OK."

counts: collections.Counter[str] = collections.Counter()
_counting = threading.Event()


def _count(name: str) -> None:
    if _counting.is_set():
        counts[name] += 1


def _replace(owner: object, name: str, value: object) -> None:
    """Put a counting wrapper in place of a library's member (for this process, which ends after)."""
    setattr(owner, name, value)


def _install_counters() -> None:
    """Count statements and hand-offs from now on (only while ``_counting`` is set)."""
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        name = Path(str(args[0] if args else kwargs["database"])).name
        conn.set_trace_callback(lambda sql: _count(f"sqlite {name}: {(sql.split(None, 1) or [''])[0].upper()}"))
        return conn

    _replace(sqlite3, "connect", traced_connect)

    class CountingQueue(queue.SimpleQueue[Any]):
        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            _count("hand-off: queue put (loop -> writer)")
            super().put(item, block, timeout)

        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            item = super().get(block, timeout)
            if block:
                _count("hand-off: writer woken")
            return item

    _replace(queue, "SimpleQueue", CountingQueue)

    call_soon_threadsafe = asyncio.BaseEventLoop.call_soon_threadsafe

    def counted_call(self: asyncio.BaseEventLoop, callback: Any, *args: Any, context: Any = None) -> Any:
        _count(f"hand-off: call_soon_threadsafe from {threading.current_thread().name.split('_')[0]}")
        return call_soon_threadsafe(self, callback, *args, context=context)

    _replace(asyncio.BaseEventLoop, "call_soon_threadsafe", counted_call)

    submit = concurrent.futures.ThreadPoolExecutor.submit

    def counted_submit(self: concurrent.futures.ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        _count(f"hand-off: submit to {self._thread_name_prefix or 'executor'}")
        return submit(self, fn, *args, **kwargs)

    _replace(concurrent.futures.ThreadPoolExecutor, "submit", counted_submit)

    try:
        import psycopg
    except ImportError:
        return
    execute = psycopg.Connection.execute
    copy = psycopg.Cursor.copy

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        words = (query if isinstance(query, str) else str(query)).split(None, 1)
        _count(f"postgres: {words[0].upper() if words else '(empty)'}")
        return execute(self, query, *args, **kwargs)

    def counted_copy(self: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
        _count("postgres: COPY")
        return copy(self, statement, *args, **kwargs)

    _replace(psycopg.Connection, "execute", counted_execute)
    _replace(psycopg.Cursor, "copy", counted_copy)


def run(turns: int, database_url: str | None) -> None:
    _install_counters()
    from tests.support import in_process_bridge

    settings: dict[str, Any] = {"database_url": database_url} if database_url else {}
    with tempfile.TemporaryDirectory() as tmp, in_process_bridge(Path(tmp), **settings) as client:
        client.post("/v1/sessions/s", json={"agent": "mock"}).raise_for_status()
        # One turn first: the session's row and the agent's start are not what a turn costs.
        with client.stream("POST", "/v1/sessions/s/messages/stream", json={"message": OK_PROMPT}) as r:
            r.read()
        _counting.set()
        for _ in range(turns):
            with client.stream("POST", "/v1/sessions/s/messages/stream", json={"message": OK_PROMPT}) as r:
                r.read()
        _counting.clear()
        events = client.get("/v1/sessions/s/events").json()["events"]
    print(f"{turns} turns ({len(events)} events in all), per turn:")
    for name, value in sorted(counts.items()):
        print(f"  {value / turns:8.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.turn_cost")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--postgres", action="store_true", help="a PostgreSQL server (started here), not SQLite")
    args = parser.parse_args()
    if not args.postgres:
        run(args.turns, None)
        return
    from tests.postgres import remove_postgres, start_postgres

    pg = start_postgres()
    try:
        run(args.turns, pg.new_database())
    finally:
        remove_postgres(pg)


if __name__ == "__main__":
    main()
