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
- **Bridges.** Each bridge registers its advertised address in ``bridges`` at start (``join``) with a
  heartbeat renewed like the leases; requests are forwarded only to an address found there, so a lease
  row cannot send them anywhere else. A bridge refuses to start when a live bridge of the database has
  another token (forwarded requests carry the client's credentials: the fleet shares one) or already
  advertises the same address (their sessions would hide each other's).
- **Forwarding** (``app/api/forward.py``): a request that must reach the agent, and every ``/v1/fs``
  request naming a session, goes to the runner.
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
import hashlib
import logging
import os
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from app.errors import StorageUnavailable, StreamError
from app.events.store import StoreError
from app.process_group import pid_exists

from .remote import RemoteSession

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


_REGISTER_LOCK = 0x61637066  # pg_advisory_xact_lock key of joining bridges: "acpf"


class FleetConflict(StoreError):
    """This bridge cannot join the fleet on its database (said at start, in one line)."""


def advertised(settings: Settings) -> str:
    """This bridge's address for the others: the setting, else its own host and port."""
    if settings.advertise_url:
        return settings.advertise_url.rstrip("/")
    return f"http://{settings.host}:{settings.port}"


def check_address(url: str) -> str | None:
    """Why ``url`` cannot be a bridge's advertised address (None: it can). Requests are forwarded
    to it with the received path appended, so it is an http(s) origin, maybe with a path prefix,
    and nothing that could change what is appended (no query, fragment or credentials)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        return f"not a URL ({exc})"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return "not an http(s) URL with a host"
    if parsed.userinfo or parsed.query or parsed.fragment or "?" in url or "#" in url:
        return "it may not carry credentials, a query or a fragment"
    return None


def token_digest(token: str | None) -> str | None:
    """What the database keeps of the fleet's token: enough to compare, slow to guess from."""
    if not token:
        return None
    return hashlib.pbkdf2_hmac("sha256", token.encode(), b"acp-rest-bridge fleet token", 100_000).hex()


def host_identity() -> str:
    """This machine, boot and process namespace: two bridges with the same identity see each
    other's process ids (a bridge restarted after kill -9 tells its dead self from a live one)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = ""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()} {boot} {namespace}"


class Lease(NamedTuple):
    owner: str | None  # the runner's advertised address
    valid: bool  # not expired
    advertised: bool  # a bridge registered that address (a lease never sends requests elsewhere)
    alive: bool  # ... and its heartbeat is current


class Sessions(Protocol):
    """What the fleet uses of this bridge's ``SessionManager`` (which holds the fleet)."""

    def local(self) -> list[Session]: ...
    def list(self) -> list[Session | RemoteSession]: ...
    def find(self, session_id: str) -> Session | RemoteSession | None: ...
    async def lookup(self, session_id: str) -> Session | RemoteSession: ...
    def add(self, session: Session | RemoteSession) -> None: ...
    def discard(self, session_id: str) -> None: ...
    def restored(self, record: dict[str, Any], runners: dict[str, str] | None = None) -> Session | RemoteSession: ...
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
        self.database = store.backend
        self.manager = manager
        self.url = advertised(settings)
        self.lease_seconds = max(settings.lease_seconds, 1.0)
        self._tasks: list[asyncio.Task[None]] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self.client: Any = None  # httpx.AsyncClient for forwarded requests (app/api/forward.py)
        self.instance = secrets.token_hex(8)  # this process, among the bridges that used this address
        self.joined = False
        self._displaced = False  # another process registered this bridge's address meanwhile
        problem = check_address(self.url)
        if problem is not None:
            raise FleetConflict(f"--advertise-url {self.url}: {problem}")

    # ---- joining the fleet ------------------------------------------------------------------------
    def join(self) -> None:
        """Register this bridge's address (blocking: at start, before it serves). Refuses (raises
        ``FleetConflict``) when a live bridge has another token or the same address. A row of this
        address left by a bridge that may still live elsewhere is watched until it expires: renewed,
        it is a live bridge; not renewed, it was this bridge's before a crash."""
        if self.joined:
            return
        digest = token_digest(self.settings.token)
        seen = None
        while True:
            try:
                waiting = self.database.call(self._register, digest, seen)
            except StorageUnavailable as exc:
                raise StoreError(f"cannot join the fleet: {exc}") from exc
            if waiting is None:
                break
            seen, seconds = waiting
            log.warning(
                "another bridge registered %s until %.1f s from now; waiting to see whether it is alive",
                self.url,
                seconds,
            )
            time.sleep(seconds + 0.5)
        self.joined = True

    def _register(self, conn: Any, digest: str | None, seen: Any) -> tuple[Any, float] | None:
        me = (self.url, self.instance, host_identity(), os.getpid(), digest, f"{self.lease_seconds} seconds")
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_REGISTER_LOCK,))
            others = conn.execute(
                "SELECT url, token FROM bridges WHERE expires > now() AND url <> %s ORDER BY url", (self.url,)
            ).fetchall()
            for url, token in others:
                if token != digest:
                    if digest is None or token is None:
                        differs = "has a token and this one has none" if digest is None else "has no token"
                    else:
                        differs = "has another token"
                    raise FleetConflict(
                        f"the bridge at {url} on this database {differs}: every bridge of a fleet needs the same "
                        "ACP_BRIDGE_TOKEN (a forwarded request carries the client's credentials)"
                    )
            row = conn.execute(
                "SELECT instance, host, pid, expires, expires > now(), extract(epoch FROM expires - now())"
                " FROM bridges WHERE url = %s",
                (self.url,),
            ).fetchone()
            if row is not None and row[4] and row[0] != self.instance:
                _, host, pid, expires, _, left = row
                if host == me[2]:
                    if pid != os.getpid() and pid_exists(pid):
                        raise FleetConflict(
                            f"another bridge on this machine (pid {pid}) already advertises {self.url}: "
                            "give each bridge its own --advertise-url"
                        )
                elif seen is not None and expires != seen:
                    raise FleetConflict(
                        f"a live bridge on {host.split()[0]} (pid {pid}) already advertises {self.url}: "
                        "give each bridge its own --advertise-url"
                    )
                elif seen is None:
                    return expires, max(float(left), 0.0)
            conn.execute(
                "INSERT INTO bridges (url, instance, host, pid, token, expires)"
                " VALUES (%s, %s, %s, %s, %s, now() + %s::interval)"
                " ON CONFLICT (url) DO UPDATE SET instance = EXCLUDED.instance, host = EXCLUDED.host,"
                " pid = EXCLUDED.pid, token = EXCLUDED.token, started = now(), expires = EXCLUDED.expires",
                me,
            )
        return None

    # ---- start and stop ---------------------------------------------------------------------------
    async def runners(self) -> dict[str, str]:
        """Sessions leased to another bridge (id -> its address), at start: followed here. Those
        still leased to this bridge (by its address) are its own again: their leases are renewed
        first, in one statement, so no other bridge can take one over meanwhile."""
        interval = f"{self.lease_seconds} seconds"

        def read(conn: Any) -> Any:
            conn.execute("UPDATE leases SET expires = now() + %s::interval WHERE owner = %s", (interval, self.url))
            return conn.execute("SELECT session_id, owner FROM leases WHERE owner <> %s", (self.url,)).fetchall()

        rows = await self.database.run(read)
        return {session_id: owner for session_id, owner in rows}

    def start(self) -> None:
        import httpx

        for session in self.manager.local():
            session.runner = self.url  # restored as this bridge's own

        # Forwarded bodies and answers stream both ways: the limit is on each read and write.
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=5.0), trust_env=False)
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

        def release(conn: Any) -> None:
            conn.execute("UPDATE leases SET expires = now() WHERE owner = %s", (self.url,))
            conn.execute(
                "UPDATE bridges SET expires = now() WHERE url = %s AND instance = %s", (self.url, self.instance)
            )

        try:
            await self.database.run(release)
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

        return bool(await self.database.run(take))

    async def lease(self, session_id: str) -> Lease:
        """Who holds the session's lease, whether it is still valid, and whether that address is a
        bridge's (and a live one)."""
        row = await self.database.run(
            lambda conn: conn.execute(
                "SELECT l.owner, l.expires > now(), b.url IS NOT NULL, coalesce(b.expires > now(), false)"
                " FROM leases l LEFT JOIN bridges b ON b.url = l.owner WHERE l.session_id = %s",
                (session_id,),
            ).fetchone()
        )
        return Lease(None, False, False, False) if row is None else Lease(row[0], *(bool(v) for v in row[1:]))

    def _target(self, session_id: str, lease: Lease) -> str:
        """The runner's address to forward to: only one a bridge advertised."""
        assert lease.owner is not None
        if not lease.advertised:
            log.error(
                "session %s: its lease names %r, which no bridge advertised; not forwarded", session_id, lease.owner
            )
            raise StreamError(f"session {session_id} is leased to an address no bridge of the fleet advertised")
        return lease.owner

    async def _renew(self) -> None:
        interval = f"{self.lease_seconds} seconds"
        failing = False  # said once per outage
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            live = [s.id for s in self.manager.local() if not s.ended]

            def renew(conn: Any, ids: list[str] = live) -> tuple[Any, list[Any]]:
                beat = conn.execute(
                    "UPDATE bridges SET expires = now() + %s::interval WHERE url = %s AND instance = %s RETURNING 1",
                    (interval, self.url, self.instance),
                ).fetchone()
                if not ids:
                    return beat, []
                return beat, conn.execute(
                    "UPDATE leases SET expires = now() + %s::interval WHERE owner = %s AND session_id = ANY(%s)"
                    " RETURNING session_id",
                    (interval, self.url, ids),
                ).fetchall()

            try:
                beat, rows = await self.database.run(renew)
                if beat is None:
                    self._reregister()
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

    def _reregister(self) -> None:
        """This bridge's row expired and another process took the address (this one stalled for a
        lease's length): said loudly, once; the next start of either refuses the other."""
        if self._displaced:
            return
        self._displaced = True
        log.error(
            "the address %s is registered by another bridge now (this one could not renew it in time); "
            "requests for this bridge's sessions may go there",
            self.url,
        )

    async def _lost(self, session_id: str) -> None:
        """Another bridge took the session over (this one could not renew its lease in time: a
        stall, a partition): its agent here stops, writing nothing more, and the session is followed."""
        session = self.manager.find(session_id)
        if session is None or isinstance(session, RemoteSession) or session.ended:
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
    async def current(self, session_id: str, session: Session | RemoteSession | None) -> Session | RemoteSession | None:
        """The session as the database has it now: one made on another bridge is followed from here
        on; a followed one learns of the runner's newest events and record. Local ones as they are."""
        if session is not None and not isinstance(session, RemoteSession):
            return session
        row = await self.database.run(lambda conn: conn.execute(_SESSIONS + " AND s.id = %s", (session_id,)).fetchone())
        if row is None:
            return session
        return self._update(row, session)

    async def sync(self) -> None:
        """Every session of the database listed here (a listing on any bridge shows all of them)."""
        rows = await self.database.run(lambda conn: conn.execute(_SESSIONS).fetchall())
        for row in rows:
            self._update(row, self.manager.find(row[0]))
        present = {row[0] for row in rows}
        for session in self.manager.list():
            if isinstance(session, RemoteSession) and session.id not in present:  # deleted elsewhere (retention)
                session.log.close_subscribers()
                self.manager.discard(session.id)
                self.store.forget_session(session.id)

    def _update(self, row: Any, session: Session | RemoteSession | None) -> Session | RemoteSession | None:
        import json

        session_id, record_text, owner, valid, last = row
        # As it is now: another look at the database may have added or replaced it meanwhile.
        session = self.manager.find(session_id)
        if session is not None and not isinstance(session, RemoteSession):
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
            session.follow(record, runner)
        if last is not None:
            session.log.follow(int(last))
        return session

    def committed(self, session_id: str, sequence: int) -> None:
        """A notification: another bridge committed the session's events up to ``sequence``."""
        session = self.manager.find(session_id)
        if isinstance(session, RemoteSession):
            session.log.follow(sequence)

    async def _listen(self) -> None:
        import psycopg

        from app.events.postgres import EVENTS_CHANNEL, SESSIONS_CHANNEL

        quiet = False  # said once per outage
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.database.url, autocommit=True, connect_timeout=5, **self.database.options
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
        if session is not None and not isinstance(session, RemoteSession):
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
        followed = [s.id for s in self.manager.list() if isinstance(s, RemoteSession) and not s.ended]
        if not followed:
            return
        rows = await self.database.run(
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
    async def route(self, session_id: str, *, forwarded: bool, files: bool = False) -> str | None:
        """Where a request for the session's agent (or, ``files``, for its files) goes: the runner's
        address, or None: here (this bridge runs it, it ended, or its runner died and this bridge
        took it over). The files of an ended session are where it last ran, while that bridge lives."""
        session = await self.manager.lookup(session_id)
        if not isinstance(session, RemoteSession):
            return None
        if session.ended:
            if not files or forwarded:
                return None
            lease = await self.lease(session_id)
            if lease.owner is None or lease.owner == self.url or not lease.alive:
                return None
            return self._target(session_id, lease)
        lease = await self.lease(session_id)
        if lease.owner == self.url or not lease.valid:
            return await self.take_over(session_id)
        if forwarded:  # (never forwarded twice: the lease moved meanwhile)
            raise StreamError(f"session {session_id} is run by the bridge at {lease.owner}, which forwarded it here")
        return self._target(session_id, lease)

    async def take_over(self, session_id: str) -> str | None:
        """Run the session here (its runner's lease expired). None when done (or it already is);
        the new runner's address when another bridge was faster."""
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            session = self.manager.find(session_id)
            if session is not None and not isinstance(session, RemoteSession):
                return None
            if not await self.claim(session_id):
                lease = await self.lease(session_id)
                return None if lease.owner is None else self._target(session_id, lease)
            record = await self.database.session_record(session_id)
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
            taken.recovery.previous = session.runner if session is not None else None
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
            lease = await self.lease(session_id)
            if not lease.valid or lease.owner == self.url:
                return await self.take_over(session_id)
            if time.monotonic() > deadline:
                return self._target(session_id, lease)
            await asyncio.sleep(0.25)
