"""The event store's PostgreSQL backend (psycopg 3 with psycopg_pool): one database for a fleet of bridges.

``BatchWriter(PostgresBackend(url))`` keeps the guarantees of a single bridge's store with the same
writer (``writer.py``: thread, queue, group commit, backlog bound, retries, notices to the logs):
``append`` queues, the writer commits what has queued up in one transaction, and only then are the
logs told (durable before visible). What differs is the database underneath:

- rows mirror the SQLite ones, ``events(session_id, sequence, type, json, raw)`` with the primary key
  ``(session_id, sequence)``: no sequence of a session can be written twice, by any bridge;
- the schema (events, sessions, leases, the fleet's bridges, the webhook outbox's tables) is created
  and migrated at start, versioned in ``schema_version`` (``MIGRATIONS``, under an advisory lock, so
  bridges starting together migrate once); a database of a newer bridge is refused;
- a batch of events is one ``COPY`` (several times faster than an ``INSERT`` of arrays); once it is
  committed the writer notifies ``acp_bridge_events`` (``<session id> <last sequence>``), and a
  change of a session's record notifies ``acp_bridge_sessions`` (a trigger): bridges that serve
  readers of another bridge's session wake up on them (``app.sessions.fleet``; a notification lost
  with a crash in between costs those readers a poll's latency, never an event);
- a database that goes away (connection lost, server shut down, disk full) is a storage failure: the
  writer says so loudly, keeps the batch, reconnects and writes it, in order, when it is back; the
  logs show new events from memory meanwhile, within the backlog bound.

Reads take a connection of a small pool on a reader thread, so the event loop never waits on the
network; the fleet (``app.sessions.fleet``) and the webhook outbox (``app.webhooks.postgres_outbox``)
run their statements the same way (``call``, ``run``). ``leases`` holds which bridge runs which live
session and ``bridges`` the fleet's live bridges; ``webhook_*`` a fleet's webhook outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeAlias

from app.errors import StorageUnavailable

from .envelope import pack, stored_time_ns, unpack
from .store import LogStats, StoreError, session_id_problem
from .stored import StoredEvent
from .writer import BatchWriter, Stored

log = logging.getLogger("acp_rest_bridge.events")

EVENTS_CHANNEL = "acp_bridge_events"
SESSIONS_CHANNEL = "acp_bridge_sessions"

# Each entry moves the schema one version on; never edit one that has shipped, add the next.
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        record TEXT,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE events (
        session_id TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        type TEXT NOT NULL,
        json TEXT NOT NULL,
        raw TEXT,
        PRIMARY KEY (session_id, sequence)
    );
    CREATE TABLE leases (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires TIMESTAMPTZ NOT NULL
    );
    CREATE FUNCTION acp_bridge_sessions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{SESSIONS_CHANNEL}', COALESCE(NEW.id, OLD.id));
        RETURN NULL;
    END $$;
    CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OR DELETE ON sessions
        FOR EACH ROW EXECUTE FUNCTION acp_bridge_sessions_notify();
    """,
    # A fleet's bridges (app/sessions/fleet.py) and its webhook outbox (app/webhooks/postgres_outbox.py).
    """
    CREATE TABLE bridges (
        url TEXT PRIMARY KEY,
        instance TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        token TEXT,
        started TIMESTAMPTZ NOT NULL DEFAULT now(),
        expires TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE webhook_outbox (
        id BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE webhook_deliveries (
        endpoint TEXT NOT NULL,
        session_id TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        event_type TEXT NOT NULL,
        payload TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        owner TEXT NOT NULL,
        failed TEXT,
        failed_at TIMESTAMPTZ,
        PRIMARY KEY (endpoint, session_id, sequence)
    );
    CREATE INDEX webhook_deliveries_owner ON webhook_deliveries (owner) WHERE failed IS NULL;
    CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (failed_at) WHERE failed IS NOT NULL;
    CREATE TABLE webhook_marks (
        session_id TEXT PRIMARY KEY,
        sequence BIGINT NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
_MIGRATION_LOCK = 0x61637062  # pg_advisory_lock key: "acpb"


def redacted(url: str) -> str:
    """The URL without its password (for logs and errors)."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # the optional extra
        raise StoreError(
            "--database-url needs the postgres extra (in a clone: pip install -e '.[postgres]'; "
            "it is psycopg[binary] and psycopg-pool)"
        ) from exc
    return psycopg


class DatabaseUnavailable(OSError):
    """The database cannot be reached or refuses writes: a storage failure the writer waits out."""


def is_storage_failure(exc: BaseException) -> bool:
    """A failure of the database or the connection (not of the data)."""
    import psycopg

    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not isinstance(
        exc, psycopg.errors.QueryCanceled
    )


class WriterConnection:
    """The writer's connection: made again when the last one was lost; psycopg's failures of the
    database become ``DatabaseUnavailable`` (what the writer keeps its batch for and retries)."""

    def __init__(self, url: str, **options: Any) -> None:
        self.url = url
        self.options = options
        self._conn: Any = None
        self.failed = False  # a storage failure since the last commit of events

    def connect(self) -> Any:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self.close()
            psycopg = _psycopg()
            try:
                conn = self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5, **self.options)
            except psycopg.Error as exc:
                self.failed = True
                raise DatabaseUnavailable(f"cannot connect: {exc}") from exc
        return conn

    def copy(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """``COPY ... FROM STDIN`` of these rows."""
        conn = self.connect()
        try:
            with conn.cursor() as cursor, cursor.copy(sql) as copy:
                for row in rows:
                    copy.write_row(row)
        except Exception as exc:
            if is_storage_failure(exc):
                self.failed = True
                raise DatabaseUnavailable(str(exc).strip() or type(exc).__name__) from exc
            raise

    def execute(self, sql: str, params: Any = None) -> Any:
        if sql == "ROLLBACK":  # after a failure: nothing to undo on a lost connection
            with contextlib.suppress(Exception):
                if self._conn is not None and not self._conn.closed:
                    self._conn.execute(sql)
            return None
        conn = self.connect()
        try:
            return conn.execute(sql, params)
        except Exception as exc:
            if is_storage_failure(exc):
                self.failed = True
                raise DatabaseUnavailable(str(exc).strip() or type(exc).__name__) from exc
            raise

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def migrate(conn: Any) -> int:
    """Bring the schema to ``SCHEMA_VERSION``; the version it was at."""
    conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        found = int(row[0] or 0)
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"the database's schema is version {found}, newer than this acp-rest-bridge's ({SCHEMA_VERSION}):"
                " it was written by a newer release; run that one (or a newer one) on it"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            with conn.transaction():
                conn.execute(MIGRATIONS[version - 1])
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
            log.info("event database migrated to schema version %d", version)
        return found
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))


def stored_row(event: StoredEvent) -> tuple[Any, ...]:
    """An event's row, in the form the SQLite store writes its ``json`` and ``raw`` columns (one
    place, so both stores keep events alike)."""
    body, raw = pack(event.session_id, event.sequence, event.type, event.json, event.raw_json)
    return (event.session_id, event.sequence, event.type, body, raw)


def loaded_event(session_id: str, sequence: int, event_type: str, body: str, raw: str | None) -> StoredEvent:
    """The event of a row written by ``stored_row``."""
    return StoredEvent(session_id, sequence, event_type, *unpack(session_id, sequence, event_type, body, raw))


_COPY = "COPY events (session_id, sequence, type, json, raw) FROM STDIN"
_NOTIFY = f"SELECT pg_notify('{EVENTS_CHANNEL}', note) FROM unnest(%s::text[]) AS note"


class PostgresBackend:
    """A PostgreSQL database under the batch writer (a ``writer.StoreBackend``), and the database of
    the fleet and its webhook outbox."""

    # Connections of a bridge: this pool (reads, the fleet's and the webhook outbox's statements),
    # the writer's one and the fleet's listening one: READERS + 2 at most.
    READERS = 4
    # A session row without a record older than this is a create that never completed.
    STALE_CREATE = "10 minutes"

    # Every commit waits on the network (and the server's WAL flush): never on the event loop.
    inline_commits = False

    def __init__(self, url: str, *, name: str | None = None) -> None:
        self.url = url
        # Its connections' application_name (pg_stat_activity): which bridge holds them.
        self.options: dict[str, Any] = {"application_name": name[:63]} if name else {}
        self.where = f"the database {redacted(url)}"
        self._conn = WriterConnection(url, **self.options)
        self._pool: Any = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def connection(self) -> WriterConnection:
        """The writer's connection (used by the writer thread only)."""
        return self._conn

    @property
    def executor(self) -> Executor:
        assert self._executor is not None, "store not open"
        return self._executor

    # ---- lifecycle -----------------------------------------------------------------------------
    def open(self) -> Stored:
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        conn = self._conn
        try:
            migrate(conn.connect())
            stored = self._load(conn)
        except (psycopg.Error, OSError, StoreError) as exc:
            conn.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot use {self.where}: {exc}") from exc
        self._pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.READERS,
            kwargs={"autocommit": True, "connect_timeout": 5, **self.options},
            # A connection is checked as it is taken: one the server dropped meanwhile (a restart) is
            # replaced, not handed to a reader.
            check=ConnectionPool.check_connection,
            timeout=10,
            open=True,
            name="event-readers",
        )
        self._executor = ThreadPoolExecutor(max_workers=self.READERS, thread_name_prefix="event-reader")
        return stored

    def _load(self, conn: WriterConnection) -> Stored:
        # A session whose create did not complete (long ago: another bridge may be creating one now).
        conn.execute("BEGIN")
        conn.execute(
            "DELETE FROM events WHERE session_id IN (SELECT id FROM sessions WHERE record IS NULL"
            f" AND created < now() - interval '{self.STALE_CREATE}')"
        )
        conn.execute(f"DELETE FROM sessions WHERE record IS NULL AND created < now() - interval '{self.STALE_CREATE}'")
        conn.execute("COMMIT")
        stored = Stored()
        for session_id, record in conn.execute("SELECT id, record FROM sessions ORDER BY created, id").fetchall():
            stored.sessions[session_id] = _read_stats(conn, session_id)
            if record is None:
                continue
            try:
                value = json.loads(record)
            except ValueError:
                log.error("session %s: unreadable record in %s, skipped", session_id, self.where)
                continue
            if isinstance(value, dict):
                stored.records.append(value)
        return stored

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._pool is not None:
            self._pool.close()
        self._conn.close()

    # ---- the writer thread -----------------------------------------------------------------------
    def write(self, events: list[StoredEvent]) -> dict[str, int]:
        with self.transaction():  # the batch is one COPY, its own transaction
            return self.insert(events)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")  # (never raises)
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("SAVEPOINT entry")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK TO entry")
                conn.execute("RELEASE entry")
            raise
        conn.execute("RELEASE entry")

    def insert(self, events: list[StoredEvent]) -> dict[str, int]:
        conn = self._conn
        last: dict[str, int] = {}
        for e in events:
            last[e.session_id] = e.sequence
        if conn.failed:
            # The connection was lost last time, maybe after the server committed (an unanswered
            # COMMIT): what is stored already is not written again. (One bridge writes a session.)
            stored = dict(
                conn.execute(
                    "SELECT s.id, (SELECT max(sequence) FROM events e WHERE e.session_id = s.id)"
                    " FROM unnest(%s::text[]) AS s(id)",
                    (list(last),),
                ).fetchall()
            )
            events = [e for e in events if e.sequence > (stored.get(e.session_id) or 0)]
        if events:
            conn.copy(_COPY, [stored_row(e) for e in events])
        # Delivered on commit: another bridge's readers read the events then. Payloads are
        # bounded (8,000 bytes): a session id no store keeps is never in one (its readers poll).
        notes = [f"{sid} {seq}" for sid, seq in last.items() if session_id_problem(sid) is None]
        conn.execute(_NOTIFY, (notes,))
        conn.failed = False
        return last

    def save_session(self, session_id: str, record: str | None) -> None:
        if record is None:
            self._conn.execute("INSERT INTO sessions (id) VALUES (%s) ON CONFLICT DO NOTHING", (session_id,))
        else:
            self._conn.execute(
                "INSERT INTO sessions (id, record) VALUES (%s, %s)"
                " ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                (session_id, record),
            )

    def delete_session(self, session_id: str) -> None:
        conn = self._conn
        conn.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM leases WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))

    def checkpoint(self) -> None:
        pass  # the server's own business

    def storage_cause(self, exc: BaseException) -> str | None:
        return None  # the connection's failures are DatabaseUnavailable (an OSError) already

    # ---- reading -----------------------------------------------------------------------------
    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(connection, *args)`` with a pooled connection, on this thread (which may block)."""
        psycopg = _psycopg()
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                return function(conn, *args)
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            raise StorageUnavailable(f"{self.where}: {exc}") from exc

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(connection, *args)`` with a pooled connection, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.call, function, *args)

    def read(self, session_id: str, after: int, limit: int | None, before: int | None) -> list[StoredEvent]:
        rows: list[Any] = self.call(
            lambda conn: conn.execute(
                "SELECT sequence, type, json, raw FROM events WHERE session_id = %s AND sequence > %s"
                " AND sequence < %s ORDER BY sequence LIMIT %s",
                (session_id, after, before if before is not None else 2**62, limit),
            ).fetchall()
        )
        return [loaded_event(session_id, seq, event_type, body, raw) for seq, event_type, body, raw in rows]

    def read_stats(self, session_id: str) -> LogStats:
        stats: LogStats = self.call(_read_stats, session_id)
        return stats

    # ---- what other bridges wrote (``app.sessions.fleet``) -------------------------------------
    async def session_record(self, session_id: str) -> dict[str, Any] | None:
        def fetch(conn: Any) -> Any:
            return conn.execute("SELECT record FROM sessions WHERE id = %s", (session_id,)).fetchone()

        row = await self.run(fetch)
        if row is None or row[0] is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None


def _read_stats(conn: Any, session_id: str) -> LogStats:
    """Count, last sequence and time of the session's stored events (two primary-key lookups)."""
    row = conn.execute(
        "SELECT sequence, json FROM events WHERE session_id = %s ORDER BY sequence DESC LIMIT 1", (session_id,)
    ).fetchone()
    if row is None:
        return LogStats()
    last, last_json = row
    (first,) = conn.execute("SELECT min(sequence) FROM events WHERE session_id = %s", (session_id,)).fetchone()
    return LogStats(last - first + 1, last, stored_time_ns(last_json))


# The event store of a fleet's bridge (annotations): ``store.backend`` is its database.
PostgresEventStore: TypeAlias = BatchWriter[PostgresBackend]
