"""The webhook outbox of a fleet, in its PostgreSQL database (``webhook_*`` tables, beside the events).

Its tables are part of the database's one versioned schema (``MIGRATIONS`` in ``app/events/postgres.py``,
from version 2), created and migrated when the event store opens; its statements run on the store's
connections (``store.backend.call``).

Every delivery row names its owner: the advertised address of the bridge that delivers it (the one
whose session committed the event). A bridge restarted on the same address takes its rows back
(``pending``); while it is gone, any live bridge takes them over (``rescue``) once its registration
in ``bridges`` has expired, i.e. once its sessions' leases can be taken too. So nothing waits for a
machine that is gone, and each row is delivered by one bridge at a time: it is moved to a new owner
in one conditional ``UPDATE``, and the webhook-id (session and sequence) stays the same on every try.

A bridge that dies between committing events and keeping their deliveries leaves a gap: the
session's mark (the newest sequence kept) is behind its selected events. It is closed by whoever
keeps the session's next deliveries (``add``: the bridge that took the session over) or, for a
session nobody took over, by ``rescue``; both under a lock of the session's mark row, so an event
is kept once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.events.postgres import PostgresEventStore, loaded_event
from app.events.stored import StoredEvent

from .outbox import Delivery

_COLUMNS = "endpoint, session_id, sequence, event_type, payload, attempts, next_at"
_INSERT = (
    "INSERT INTO webhook_deliveries (endpoint, session_id, sequence, event_type, payload, attempts, next_at, owner)"
    " SELECT *, %s FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[], %s::int[],"
    " %s::float8[]) ON CONFLICT DO NOTHING RETURNING endpoint, session_id, sequence"
)
_ADVANCE = (
    "INSERT INTO webhook_marks (session_id, sequence) SELECT * FROM unnest(%s::text[], %s::bigint[])"
    " ON CONFLICT (session_id) DO UPDATE SET sequence = greatest(webhook_marks.sequence, EXCLUDED.sequence)"
)
# A bridge that is not registered as live: what it owned is anybody's.
_DEAD = "NOT EXISTS (SELECT 1 FROM bridges b WHERE b.url = {owner} AND b.expires > now())"
CLAIM_BATCH = 5000  # deliveries taken over at a time
GAP_BATCH = 10_000  # events read at a time to close a gap


class PostgresOutbox:
    def __init__(
        self,
        store: PostgresEventStore,
        owner: str,
        endpoints: list[str],
        types: frozenset[str],
        payload: Callable[[StoredEvent], str],
        rescue_interval: float,
    ) -> None:
        self.store = store
        self.owner = owner
        self.endpoints = endpoints
        self.types = sorted(types)
        self.payload = payload
        self.rescue_interval = rescue_interval

    def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        return self.store.backend.call(function, *args)

    def open(self) -> bool:
        row = self._call(
            lambda conn: conn.execute(
                "INSERT INTO webhook_outbox DEFAULT VALUES ON CONFLICT DO NOTHING RETURNING true"
            ).fetchone()
        )
        return row is not None

    def pending(self) -> list[Delivery]:
        rows = self._call(
            lambda conn: conn.execute(
                f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE owner = %s AND failed IS NULL"
                " AND endpoint = ANY(%s) ORDER BY endpoint, session_id, sequence",
                (self.owner, self.endpoints),
            ).fetchall()
        )
        return [Delivery(*row) for row in rows]

    def marks(self) -> dict[str, int]:
        rows = self._call(lambda conn: conn.execute("SELECT session_id, sequence FROM webhook_marks").fetchall())
        return {session_id: int(sequence) for session_id, sequence in rows}

    def set_marks(self, marks: dict[str, int]) -> None:
        if marks:
            self._call(lambda conn: conn.execute(_ADVANCE, (list(marks), list(marks.values()))))

    # ---- keeping deliveries ------------------------------------------------------------------------
    def add(self, deliveries: list[Delivery]) -> list[Delivery]:
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for d in deliveries:
            first[d.session_id] = min(first.get(d.session_id, d.sequence), d.sequence)
            last[d.session_id] = max(last.get(d.session_id, 0), d.sequence)

        def keep(conn: Any) -> list[Delivery]:
            with conn.transaction():
                marks = self._lock_marks(conn, sorted(first))
                found: list[Delivery] = []
                for session_id, mark in marks.items():
                    if mark < first[session_id] - 1:  # committed earlier, never kept: by a bridge that died
                        found += self._gap(conn, session_id, mark, first[session_id])
                kept = self._insert(conn, [*found, *deliveries])
                conn.execute(_ADVANCE, (list(last), list(last.values())))
            return [d for d in found if d.key in kept]

        result: list[Delivery] = self._call(keep)
        return result

    def _lock_marks(self, conn: Any, sessions: list[str]) -> dict[str, int]:
        """The sessions' marks, their rows locked until the transaction ends (made when missing)."""
        conn.execute(
            "INSERT INTO webhook_marks (session_id, sequence) SELECT unnest(%s::text[]), 0 ON CONFLICT DO NOTHING",
            (sessions,),
        )
        rows = conn.execute(
            "SELECT session_id, sequence FROM webhook_marks WHERE session_id = ANY(%s) ORDER BY session_id FOR UPDATE",
            (sessions,),
        ).fetchall()
        return {session_id: int(sequence) for session_id, sequence in rows}

    def _gap(self, conn: Any, session_id: str, after: int, before: int) -> list[Delivery]:
        """Deliveries of the session's selected events between two sequences (not kept yet)."""
        out: list[Delivery] = []
        while True:
            rows = conn.execute(
                "SELECT sequence, type, json, raw FROM events WHERE session_id = %s AND sequence > %s"
                " AND sequence < %s AND type = ANY(%s) ORDER BY sequence LIMIT %s",
                (session_id, after, before, self.types, GAP_BATCH),
            ).fetchall()
            for sequence, event_type, body, raw in rows:
                payload = self.payload(loaded_event(session_id, sequence, event_type, body, raw))
                out += [Delivery(url, session_id, sequence, event_type, payload) for url in self.endpoints]
            if len(rows) < GAP_BATCH:
                return out
            after = rows[-1][0]

    def _insert(self, conn: Any, deliveries: list[Delivery]) -> set[tuple[str, str, int]]:
        """Keep the deliveries not kept yet; the keys of those."""
        if not deliveries:
            return set()
        columns: list[list[Any]] = [
            [d.endpoint for d in deliveries],
            [d.session_id for d in deliveries],
            [d.sequence for d in deliveries],
            [d.event_type for d in deliveries],
            [d.payload for d in deliveries],
            [d.attempts for d in deliveries],
            [d.next_at for d in deliveries],
        ]
        rows = conn.execute(_INSERT, (self.owner, *columns)).fetchall()
        return {(endpoint, session_id, int(sequence)) for endpoint, session_id, sequence in rows}

    # ---- outcomes ------------------------------------------------------------------------------------
    def delivered(self, delivery: Delivery) -> None:
        self._call(
            lambda conn: conn.execute(
                "DELETE FROM webhook_deliveries WHERE endpoint = %s AND session_id = %s AND sequence = %s",
                delivery.key,
            )
        )

    def retry_later(self, delivery: Delivery) -> None:
        self._call(
            lambda conn: conn.execute(
                "UPDATE webhook_deliveries SET attempts = %s, next_at = %s"
                " WHERE endpoint = %s AND session_id = %s AND sequence = %s AND owner = %s",
                (delivery.attempts, delivery.next_at, *delivery.key, self.owner),
            )
        )

    def failed(self, delivery: Delivery, reason: str) -> None:
        self._call(
            lambda conn: conn.execute(
                "UPDATE webhook_deliveries SET attempts = %s, failed = %s, failed_at = now()"
                " WHERE endpoint = %s AND session_id = %s AND sequence = %s",
                (delivery.attempts, reason, *delivery.key),
            )
        )

    def prune(self, before: float) -> int:
        count: int = self._call(
            lambda conn: (
                conn.execute(
                    "DELETE FROM webhook_deliveries WHERE failed IS NOT NULL AND failed_at < to_timestamp(%s)",
                    (before,),
                ).rowcount
            )
        )
        return count

    # ---- what dead bridges left -------------------------------------------------------------------
    def rescue(self) -> list[Delivery]:
        claimed = self._call(self._claim)
        return [*claimed, *self._abandoned()]

    def _claim(self, conn: Any) -> list[Delivery]:
        """The pending deliveries of dead bridges, now this one's (at once due)."""
        rows = conn.execute(
            f"UPDATE webhook_deliveries SET owner = %s, next_at = 0 WHERE (endpoint, session_id, sequence) IN ("
            " SELECT endpoint, session_id, sequence FROM webhook_deliveries x WHERE x.failed IS NULL"
            f" AND x.owner <> %s AND x.endpoint = ANY(%s) AND {_DEAD.format(owner='x.owner')}"
            f" LIMIT {CLAIM_BATCH} FOR UPDATE SKIP LOCKED) RETURNING {_COLUMNS}",
            (self.owner, self.owner, self.endpoints),
        ).fetchall()
        return [Delivery(*row) for row in sorted(rows, key=lambda r: (r[0], r[1], r[2]))]

    def _abandoned(self) -> list[Delivery]:
        """Deliveries of events that sessions of dead bridges committed but never kept."""
        # (A session's lease names the bridge that ran it last; one that is alive keeps its own.)
        stale = (
            "SELECT l.session_id, coalesce(m.sequence, 0) FROM leases l"
            " LEFT JOIN webhook_marks m ON m.session_id = l.session_id"
            f" WHERE l.owner <> %s AND {_DEAD.format(owner='l.owner')} AND EXISTS (SELECT 1 FROM events e"
            " WHERE e.session_id = l.session_id AND e.sequence > coalesce(m.sequence, 0) AND e.type = ANY(%s))"
            " LIMIT 100"
        )
        candidates = self._call(lambda conn: conn.execute(stale, (self.owner, self.types)).fetchall())
        found: list[Delivery] = []
        for session_id, _ in candidates:
            found += self._call(self._adopt, session_id)
        return found

    def _adopt(self, conn: Any, session_id: str) -> list[Delivery]:
        with conn.transaction():
            mark = self._lock_marks(conn, [session_id])[session_id]
            dead = _DEAD.format(owner="l.owner")
            owner = conn.execute(
                f"SELECT l.owner FROM leases l WHERE l.session_id = %s AND l.owner <> %s AND {dead}",
                (session_id, self.owner),
            ).fetchone()
            if owner is None:  # taken over meanwhile: its new runner closes the gap
                return []
            found = self._gap(conn, session_id, mark, 2**62)
            if not found:
                return []
            kept = self._insert(conn, found)
            conn.execute(_ADVANCE, ([session_id], [max(d.sequence for d in found)]))
        return [d for d in found if d.key in kept]

    def close(self) -> None:
        pass  # the connections are the event store's
