"""The webhook outbox in SQLite: ``webhooks.sqlite3`` beside the event store in the data dir, its
schema versioned in ``PRAGMA user_version`` (``MIGRATIONS``)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from app.events.schema import Migration, migrate

from .outbox import Delivery

# Each entry moves the schema one version on; never edit one that has shipped, add the next.
MIGRATIONS: tuple[Migration, ...] = (
    # 1: the first schema (an outbox written before versions were kept has it).
    (
        """CREATE TABLE deliveries (
    endpoint TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    failed TEXT,
    failed_at REAL,
    PRIMARY KEY (endpoint, session_id, sequence)
) WITHOUT ROWID""",
        """CREATE TABLE marks (
    session_id TEXT PRIMARY KEY,
    sequence INTEGER NOT NULL
) WITHOUT ROWID""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def unversioned_version(conn: sqlite3.Connection) -> int:
    """The version of an outbox without one: 0 (new), else 1 (the only schema written before)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deliveries'").fetchone()
    return 0 if row is None else 1


class SqliteOutbox:
    FILENAME = "webhooks.sqlite3"
    rescue_interval = 0.0  # one bridge: nothing to take over

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILENAME
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "outbox not open"
        return self._conn

    def open(self) -> bool:
        # Used from the dispatcher's one thread, which is not the one that opens it.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self.path.chmod(0o600)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a crash of the bridge loses no commit
            conn.execute("PRAGMA busy_timeout=10000")
            found = migrate(conn, MIGRATIONS, unversioned_version, str(self.path))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return found == 0

    def pending(self) -> list[Delivery]:
        rows = self.conn.execute(
            "SELECT endpoint, session_id, sequence, event_type, payload, attempts, next_at FROM deliveries "
            "WHERE failed IS NULL ORDER BY endpoint, session_id, sequence"
        ).fetchall()
        return [Delivery(*row) for row in rows]

    def marks(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT session_id, sequence FROM marks").fetchall())

    def set_marks(self, marks: dict[str, int]) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self._advance(marks)

    def add(self, deliveries: list[Delivery]) -> list[Delivery]:
        marks: dict[str, int] = {}
        for delivery in deliveries:
            marks[delivery.session_id] = max(marks.get(delivery.session_id, 0), delivery.sequence)
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT OR IGNORE INTO deliveries (endpoint, session_id, sequence, event_type, payload, attempts, "
                "next_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (d.endpoint, d.session_id, d.sequence, d.event_type, d.payload, d.attempts, d.next_at)
                    for d in deliveries
                ],
            )
            self._advance(marks)
        return []  # (what a crash left is found at start, from the marks)

    def _advance(self, marks: dict[str, int]) -> None:
        self.conn.executemany(
            "INSERT INTO marks (session_id, sequence) VALUES (?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET sequence = max(sequence, excluded.sequence)",
            list(marks.items()),
        )

    def delivered(self, delivery: Delivery) -> None:
        self.conn.execute("DELETE FROM deliveries WHERE endpoint = ? AND session_id = ? AND sequence = ?", delivery.key)

    def retry_later(self, delivery: Delivery) -> None:
        self.conn.execute(
            "UPDATE deliveries SET attempts = ?, next_at = ? WHERE endpoint = ? AND session_id = ? AND sequence = ?",
            (delivery.attempts, delivery.next_at, *delivery.key),
        )

    def failed(self, delivery: Delivery, reason: str) -> None:
        self.conn.execute(
            "UPDATE deliveries SET attempts = ?, failed = ?, failed_at = ? "
            "WHERE endpoint = ? AND session_id = ? AND sequence = ?",
            (delivery.attempts, reason, time.time(), *delivery.key),
        )

    def prune(self, before: float) -> int:
        return self.conn.execute(
            "DELETE FROM deliveries WHERE failed IS NOT NULL AND failed_at < ?", (before,)
        ).rowcount

    def rescue(self) -> list[Delivery]:
        return []

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
