"""A fleet: several bridges on one PostgreSQL database (``PostgresEventStore``).

Every bridge lists every session and serves the events of any of them; one bridge runs each live
session (its agent process), the *runner*, named by the address it advertises (``advertise_url``).

- **Leases.** The runner holds a lease on each live session it runs (``leases``: owner, expiry),
  renewed every third of ``lease_seconds`` while it lives, and shortened to nothing when it stops
  cleanly. A lease is taken in one statement that succeeds only when nobody else holds it (free,
  expired, or already this bridge's), so two bridges never run one session.
- **Following.** A session another bridge runs is *followed* here: a ``Session`` made from the
  record the runner saved, with no agent, whose log learns of the runner's commits (``log.follow``)
  and reads them from the database by cursor. The database notifies each commit
  (``LISTEN acp_bridge_events``, a wake-up only); a poll every ``POLL`` seconds and a fresh look
  before every read of a followed session make a missed notification cost latency, never an event.
- **Forwarding** (``app/api/forward.py``): a request that must reach the agent goes to the runner.
- **Taking over.** When the runner's lease has expired (it died: kill -9, host gone), the next
  request for the agent on any bridge takes the lease, closes in the log what the dead agent left
  open and starts the agent here with resume -> load -> new (``recovery``); the status item names
  this bridge. Sequences continue from the database's last one: nothing is written twice (the
  primary key would refuse it).

A bridge that restarts lists the sessions it ran and others took over as followed; those still
leased to it (it came back before anybody took them) are its own again, as after any restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from app.errors import StreamError

if TYPE_CHECKING:
    from app.events.log import SessionEventLog
    from app.events.postgres import PostgresEventStore
    from app.settings import Settings

    from .session import Session

log = logging.getLogger("acp_rest_bridge.fleet")

_LAST = "(SELECT e.sequence FROM events e WHERE e.session_id = s.id ORDER BY e.sequence DESC LIMIT 1)"
_SESSIONS = (
    f"SELECT s.id, s.record, l.owner, l.expires > now(), {_LAST} FROM sessions s"
    " LEFT JOIN leases l ON l.session_id = s.id WHERE s.record IS NOT NULL"
)


def advertised(settings: Settings) -> str:
    """This bridge's address for the others: the setting, else its own host and port."""
    if settings.advertise_url:
        return settings.advertise_url.rstrip("/")
    return f"http://{settings.host}:{settings.port}"


class Sessions(Protocol):
    """What the fleet uses of this bridge's ``SessionManager`` (which holds the fleet)."""

    def list(self) -> list[Session]: ...
    def find(self, session_id: str) -> Session | None: ...
    async def lookup(self, session_id: str) -> Session: ...
    def add(self, session: Session) -> None: ...
    def discard(self, session_id: str) -> None: ...
    def restored(self, record: dict[str, Any], runners: dict[str, str] | None = None) -> Session: ...
    def resumed_here(self, record: dict[str, Any], log_: SessionEventLog) -> Session: ...
    def new_log(self, session_id: str) -> SessionEventLog: ...


class Fleet:
    # Seconds between looks for commits of followed sessions that no notification announced.
    POLL = 1.0
    # Seconds between tries to listen again after the listening connection was lost.
    RELISTEN = 1.0

    def __init__(self, settings: Settings, store: PostgresEventStore, manager: Sessions) -> None:
        self.settings = settings
        self.store = store
        self.manager = manager
        self.url = advertised(settings)
        self.lease_seconds = max(settings.lease_seconds, 1.0)
        self._tasks: list[asyncio.Task[None]] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self.client: Any = None  # httpx.AsyncClient for forwarded requests (app/api/forward.py)

    # ---- start and stop ---------------------------------------------------------------------------
    async def runners(self) -> dict[str, str]:
        """Sessions leased to another bridge (id -> its address), at start: followed here. Those
        still leased to this bridge (by its address) are its own again: their leases are renewed
        first, in one statement, so no other bridge can take one over meanwhile."""
        interval = f"{self.lease_seconds} seconds"

        def read(conn: Any) -> Any:
            conn.execute("UPDATE leases SET expires = now() + %s::interval WHERE owner = %s", (interval, self.url))
            return conn.execute("SELECT session_id, owner FROM leases WHERE owner <> %s", (self.url,)).fetchall()

        rows = await self.store.run(read)
        return {session_id: owner for session_id, owner in rows}

    def start(self) -> None:
        import httpx

        for session in self.manager.list():
            if session.remote_info is None:
                session.runner = self.url  # restored as this bridge's own

        self.client = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=5.0))
        self._tasks = [
            asyncio.create_task(self._listen(), name="fleet-listen"),
            asyncio.create_task(self._poll(), name="fleet-poll"),
            asyncio.create_task(self._renew(), name="fleet-leases"),
        ]

    async def stop(self) -> None:
        """After the sessions stopped: their leases end now, so another bridge takes them at once."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        if self.client is not None:
            await self.client.aclose()
        try:
            await self.store.run(
                lambda conn: conn.execute("UPDATE leases SET expires = now() WHERE owner = %s", (self.url,))
            )
        except Exception as exc:
            log.warning("cannot release the leases of this bridge: %s", exc)

    # ---- leases -------------------------------------------------------------------------------------
    async def claim(self, session_id: str) -> bool:
        """Take the session's lease: True when this bridge holds it now."""
        interval = f"{self.lease_seconds} seconds"

        def take(conn: Any) -> Any:
            return conn.execute(
                "INSERT INTO leases (session_id, owner, expires) VALUES (%s, %s, now() + %s::interval)"
                " ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires"
                " WHERE leases.expires < now() OR leases.owner = EXCLUDED.owner RETURNING owner",
                (session_id, self.url, interval),
            ).fetchone()

        return bool(await self.store.run(take))

    async def lease(self, session_id: str) -> tuple[str | None, bool]:
        """Who holds the session's lease, and whether it is still valid."""
        row = await self.store.run(
            lambda conn: conn.execute(
                "SELECT owner, expires > now() FROM leases WHERE session_id = %s", (session_id,)
            ).fetchone()
        )
        return (None, False) if row is None else (row[0], bool(row[1]))

    async def _renew(self) -> None:
        interval = f"{self.lease_seconds} seconds"
        failing = False  # said once per outage
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            live = [s.id for s in self.manager.list() if s.remote_info is None and not s.ended]
            if not live:
                continue
            try:
                rows = await self.store.run(
                    lambda conn, ids=live: conn.execute(
                        "UPDATE leases SET expires = now() + %s::interval WHERE owner = %s AND session_id = ANY(%s)"
                        " RETURNING session_id",
                        (interval, self.url, ids),
                    ).fetchall()
                )
            except Exception as exc:
                if not failing:
                    log.error("cannot renew the leases of the sessions this bridge runs: %s", exc)
                failing = True
                continue
            if failing:
                log.warning("the leases of the sessions this bridge runs are renewed again")
            failing = False
            renewed = {row[0] for row in rows}
            for session_id in live:
                if session_id not in renewed:
                    await self._lost(session_id)

    async def _lost(self, session_id: str) -> None:
        """Another bridge took the session over (this one could not renew its lease in time: a
        stall, a partition): its agent here stops, writing nothing more, and the session is followed."""
        session = self.manager.find(session_id)
        if session is None or session.remote_info is not None or session.ended:
            return
        log.error("session %s: another bridge holds its lease now; stopping its agent here", session_id)
        session.persisted = False  # the record is the new runner's now
        try:
            await session.shutdown()
        except Exception:
            log.exception("session %s: stopping its agent failed", session_id)
        session.log.close_subscribers()  # (its readers reconnect, with Last-Event-ID, to the followed log)
        self.manager.discard(session_id)
        await self.current(session_id, None)

    # ---- following -----------------------------------------------------------------------------------
    async def current(self, session_id: str, session: Session | None) -> Session | None:
        """The session as the database has it now: one made on another bridge is followed from here
        on; a followed one learns of the runner's newest events and record. Local ones as they are."""
        if session is not None and session.remote_info is None:
            return session
        row = await self.store.run(lambda conn: conn.execute(_SESSIONS + " AND s.id = %s", (session_id,)).fetchone())
        if row is None:
            return session
        return self._update(row, session)

    async def sync(self) -> None:
        """Every session of the database listed here (a listing on any bridge shows all of them)."""
        rows = await self.store.run(lambda conn: conn.execute(_SESSIONS).fetchall())
        for row in rows:
            self._update(row, self.manager.find(row[0]))
        present = {row[0] for row in rows}
        for session in self.manager.list():
            if session.remote_info is not None and session.id not in present:  # deleted elsewhere (retention)
                session.log.close_subscribers()
                self.manager.discard(session.id)
                self.store.forget_session(session.id)

    def _update(self, row: Any, session: Session | None) -> Session | None:
        import json

        session_id, record_text, owner, valid, last = row
        # As it is now: another look at the database may have added or replaced it meanwhile.
        session = self.manager.find(session_id)
        if session is not None and session.remote_info is None:
            return session  # run here
        try:
            record = json.loads(record_text)
        except ValueError:
            return session
        runner = owner or None
        if session is None:
            if owner == self.url and valid:
                return None  # being made here right now
            try:
                session = self.manager.restored(record, {session_id: runner or ""})
            except (KeyError, TypeError, ValueError) as exc:
                log.error("cannot follow session %s (%s)", session_id, exc)
                return None
            session.runner = runner
            self.manager.add(session)
        elif isinstance(record.get("info"), dict):
            session.follow_remote(record, runner)
        if last is not None:
            session.log.follow(int(last))
        return session

    def committed(self, session_id: str, sequence: int) -> None:
        """A notification: another bridge committed the session's events up to ``sequence``."""
        session = self.manager.find(session_id)
        if session is not None and session.remote_info is not None:
            session.log.follow(sequence)

    async def _listen(self) -> None:
        import psycopg

        from app.events.postgres import EVENTS_CHANNEL, SESSIONS_CHANNEL

        quiet = False  # said once per outage
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.store.url, autocommit=True, connect_timeout=5
                ) as conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    await conn.execute(f"LISTEN {SESSIONS_CHANNEL}")
                    await self._catch_up()  # what was committed while nobody listened
                    if quiet:
                        log.warning("listening to the database for new events again")
                    quiet = False
                    async for note in conn.notifies():
                        if note.channel == EVENTS_CHANNEL:
                            session_id, _, sequence = note.payload.rpartition(" ")
                            with contextlib.suppress(ValueError):
                                self.committed(session_id, int(sequence))
                        else:
                            self._refresh_soon(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not quiet:
                    log.warning("not listening to the database for new events (%s); polling meanwhile", exc)
                quiet = True
            await asyncio.sleep(self.RELISTEN)

    def _refresh_soon(self, session_id: str) -> None:
        session = self.manager.find(session_id)
        if session is not None and session.remote_info is None:
            return

        async def refresh() -> None:
            try:
                await self.current(session_id, self.manager.find(session_id))
            except Exception as exc:
                log.debug("session %s: cannot read its record: %s", session_id, exc)

        task = asyncio.create_task(refresh(), name=f"fleet-refresh-{session_id}")
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _catch_up(self) -> None:
        followed = [s.id for s in self.manager.list() if s.remote_info is not None and not s.ended]
        if not followed:
            return
        rows = await self.store.run(
            lambda conn: conn.execute(
                "SELECT s.id, " + _LAST + " FROM unnest(%s::text[]) AS s(id)", (followed,)
            ).fetchall()
        )
        for session_id, last in rows:
            if last is not None:
                self.committed(session_id, int(last))

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.POLL)
            try:
                await self._catch_up()
            except Exception as exc:
                log.debug("fleet poll failed: %s", exc)

    # ---- requests for the agent ------------------------------------------------------------------------
    async def route(self, session_id: str, *, forwarded: bool) -> str | None:
        """Where a request for the session's agent goes: the runner's address, or None: here (this
        bridge runs it, it ended, or its runner died and this bridge took it over)."""
        session = await self.manager.lookup(session_id)
        if session.remote_info is None or session.ended:
            return None
        owner, valid = await self.lease(session_id)
        if owner == self.url or not valid:
            return await self.take_over(session_id)
        if forwarded:  # (never forwarded twice: the lease moved meanwhile)
            raise StreamError(f"session {session_id} is run by the bridge at {owner}, which forwarded it here")
        return owner

    async def take_over(self, session_id: str) -> str | None:
        """Run the session here (its runner's lease expired). None when done (or it already is);
        the new runner's address when another bridge was faster."""
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            session = self.manager.find(session_id)
            if session is not None and session.remote_info is None:
                return None
            if not await self.claim(session_id):
                owner, _ = await self.lease(session_id)
                return owner
            record = await self.store.session_record(session_id)
            if record is None:
                return None
            stats = await self.store.refresh_stats(session_id)
            old = session.log if session is not None else self.manager.new_log(session_id)
            old.follow(stats.last_sequence)
            old.finished = False
            taken = self.manager.resumed_here(record, old)
            if taken.recovery is None:  # it ended after all (its record says so)
                taken.runner = self.url
                self.manager.add(taken)
                return None
            taken.recovery.bridge = self.url
            taken.runner = self.url
            self.manager.add(taken)
            log.warning(
                "session %s: taken over from the bridge at %s (its lease expired)",
                session_id,
                session.runner if session is not None else "?",
            )
            from . import recovery  # (with the ACP SDK: loaded when first needed, not at start)

            await recovery.settle(taken, self.store)
            return None

    async def wait_for_lease(self, session_id: str) -> str | None:
        """The runner cannot be reached: once its lease expires (it died), take the session over.
        Waits at most the lease's length (and a bit); the runner's address if it still holds it."""
        deadline = time.monotonic() + self.lease_seconds + 2
        while True:
            owner, valid = await self.lease(session_id)
            if not valid or owner == self.url:
                return await self.take_over(session_id)
            if time.monotonic() > deadline:
                return owner
            await asyncio.sleep(0.25)
