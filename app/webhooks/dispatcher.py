"""Webhook delivery: every committed event of a selected type becomes one delivery per endpoint,
kept in the outbox first, then POSTed, signed as Standard Webhooks specifies (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``; the ``standardwebhooks`` library).

- The ``webhook-id`` is the event's (its session and sequence): the same on every try and after a
  restart, so a receiver can drop duplicates (delivery is at least once).
- Per endpoint and session, one delivery at a time, in sequence order: a retry holds back the
  session's later events, never another session's.
- Per endpoint, at most ``CONCURRENCY`` posts at once and ``webhook_queue_limit`` deliveries waiting:
  a slow or hanging receiver delays and drops only its own deliveries, never another URL's.
- A try is bounded as a whole by the timeout (connecting, sending, the answer's head and body: a
  receiver that trickles its answer cannot hold it longer). A failed try (no answer in time, or a
  status other than 2xx) is tried again after an exponentially growing delay with jitter, up to the
  set number of tries; then the delivery is recorded as failed (kept in the outbox for
  ``webhook_failed_retention_days``, counted, logged) and the next one goes. Failures are logged at
  warning, at most one line per URL a minute (with the count of those not logged).
- A URL is logged without its credentials and query (``shown``): they are often the receiver's secret.
- Sessions never wait for any of it: ``observe`` only queues (bounded), the posts run in tasks of
  their own on their own HTTP client, the outbox is written on a thread of its own.
- At start the outbox's pending deliveries are queued again, and events committed after the
  outbox last looked at a session (a crash between the two) are found in the event store. In a
  fleet the outbox is the database's: every ``rescue_interval`` what dead bridges left is taken
  over (``app/webhooks/postgres_outbox.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from app.events.store import EventStore
from app.events.stored import StoredEvent
from app.metrics import Metrics
from app.settings import Settings

from .outbox import Delivery, OutboxStore, WebhookConfigError

log = logging.getLogger("acp_rest_bridge.webhooks")

T = TypeVar("T")
READ_BATCH = 1000  # events read from the store at a time when catching up at start
CONCURRENCY = 8  # posts in flight at once per endpoint (over its sessions)
WARN_EVERY = 60.0  # seconds between two failure warnings of one endpoint
PRUNE_EVERY = 3600.0  # seconds between two prunings of failed deliveries


def shown(url: str) -> str:
    """The URL as logs show it: without credentials and query (often the receiver's secret)."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        return "<an invalid URL>"
    port = f":{parsed.port}" if parsed.port is not None else ""
    credentials = "***@" if parsed.userinfo else ""
    query = "?***" if parsed.query or "?" in url else ""
    return f"{parsed.scheme}://{credentials}{parsed.host}{port}{parsed.path}{query}"


def scrubbed(text: str, url: str) -> str:
    """``text`` (an error) with every spelling of ``url`` in it shown as ``shown`` shows it."""
    spellings = {url}
    try:
        spellings.add(str(httpx.URL(url)))
    except Exception:
        pass
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, shown(url))
    return text


class Throttle:
    """Failure warnings of one endpoint: the first at once, then one a ``WARN_EVERY`` at most,
    saying how many were not logged in between."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}

    def admit(self, key: str) -> int | None:
        """None: do not log now; else how many were skipped since the last line."""
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < WARN_EVERY:
            self._skipped[key] = self._skipped.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._skipped.pop(key, 0)


def _more(skipped: int) -> str:
    return f" ({skipped} more failures of this URL not logged in the last minute)" if skipped else ""


def webhook_id(session_id: str, sequence: int) -> str:
    """Stable per event: a digest of the session id (any text) and the sequence."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"msg_{digest}_{sequence}"


def payload_of(event: StoredEvent) -> str:
    """The body: ``type``, ``timestamp`` and the event itself (as ``GET /events`` shows it) in ``data``."""
    stamp = datetime.fromtimestamp(event.time_ns / 1e9, UTC).isoformat().replace("+00:00", "Z")
    return f'{{"type":{json.dumps(event.type)},"timestamp":"{stamp}","data":{event.json}}}'


def retry_delay(attempts: int, first: float, ceiling: float) -> float:
    """After ``attempts`` failed tries: ``first`` doubled each time up to ``ceiling``, less up to
    a fifth at random (so that many deliveries failing together do not come back together)."""
    delay: float = min(first * 2.0 ** max(attempts - 1, 0), ceiling)
    return delay * (1 - random.random() * 0.2)


class WebhookDispatcher:
    def __init__(self, settings: Settings, store: EventStore, outbox: OutboxStore, metrics: Metrics) -> None:
        from standardwebhooks import Webhook

        self.endpoints = list(dict.fromkeys(settings.webhook_url))
        if not settings.webhook_secret:
            raise WebhookConfigError("a webhook URL needs ACP_BRIDGE_WEBHOOK_SECRET (whsec_<base64>)")
        try:
            self.signer = Webhook(settings.webhook_secret)
        except Exception as exc:
            raise WebhookConfigError(f"ACP_BRIDGE_WEBHOOK_SECRET is not a usable secret: {exc}") from exc
        for url in self.endpoints:
            try:
                scheme = httpx.URL(url).scheme
            except Exception as exc:
                raise WebhookConfigError(f"webhook URL is not a URL: {shown(url)}") from exc
            if scheme not in ("http", "https"):
                raise WebhookConfigError(f"webhook URL is not http(s): {shown(url)}")
        self.types = frozenset(settings.webhook_events)
        self.first_delay = settings.webhook_retry_delay
        self.max_delay = max(settings.webhook_retry_max_delay, settings.webhook_retry_delay)
        self.attempts = max(settings.webhook_attempts, 1)
        self.timeout = settings.webhook_timeout
        self.limit = settings.webhook_queue_limit
        self.retention = settings.webhook_failed_retention_days * 86400
        self.store = store
        self.outbox = outbox
        self.metrics = metrics
        # Queued deliveries by (endpoint, session), oldest first, and the task working on each.
        self._queues: dict[tuple[str, str], list[Delivery]] = {}
        self._workers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._queued: set[tuple[str, str, int]] = set()
        self._depth = dict.fromkeys(self.endpoints, 0)  # queued deliveries per endpoint
        self._unsaved: list[Delivery] = []
        self._saving = False
        self._ready = False  # workers start once what an earlier run left is queued
        self._executor: ThreadPoolExecutor | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots = {url: asyncio.Semaphore(CONCURRENCY) for url in self.endpoints}
        self._warnings = Throttle()
        self._catching_up: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._pending_io: set[asyncio.Future[Any]] = set()

    @property
    def queue_depth(self) -> int:
        return len(self._queued)

    # ---- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Open the outbox and queue what it holds (before any session records an event)."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook-outbox")
        created = await self._io(self.outbox.open)
        for delivery in await self._io(self.outbox.pending):
            if delivery.endpoint in self.endpoints:
                delivery.next_at = 0.0  # a restart is a new chance: no waiting for an old schedule
                self._enqueue(delivery)
        self._created = created

    def start(self, sessions: list[str], own: list[str] | None = None) -> None:
        """After the sessions are restored: catch up with events the outbox has not seen (of ``own``
        sessions, those this bridge runs; default all), then deliver."""
        self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, trust_env=False)
        self._catching_up = asyncio.create_task(
            self._catch_up(sessions, sessions if own is None else own), name="webhooks-catch-up"
        )
        if self.retention > 0:
            self._background.append(asyncio.create_task(self._prune(), name="webhooks-prune"))
        if self.outbox.rescue_interval > 0:
            self._background.append(asyncio.create_task(self._rescue(), name="webhooks-rescue"))

    async def close(self) -> None:
        """Stop delivering (what is left stays in the outbox for the next run) and close the outbox."""
        tasks = [t for t in (self._catching_up, *self._background, *self._workers.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._unsaved:
            self._save()
        if self._pending_io:
            await asyncio.gather(*self._pending_io, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
        if self._executor is not None:
            await self._io(self.outbox.close)
            self._executor.shutdown(wait=True)

    async def _catch_up(self, sessions: list[str], own: list[str]) -> None:
        try:
            if self._created:
                # A new outbox: events from before webhooks were set up are not delivered.
                marks = {sid: self.store.stats(sid).last_sequence for sid in sessions}
                await self._io(self.outbox.set_marks, marks)
            else:
                marks = await self._io(self.outbox.marks)
                for sid in own:
                    await self._catch_up_session(sid, marks.get(sid, 0))
        except Exception:
            log.exception("webhooks: cannot read what the outbox missed; delivering what it holds")
        self._ready = True
        for key in list(self._queues):
            self._work(key)

    async def _prune(self) -> None:
        """Failed deliveries older than the retention are deleted, at start and hourly."""
        while True:
            try:
                count = await self._io(self.outbox.prune, time.time() - self.retention)
                if count:
                    log.info("webhook outbox: %d failed deliveries older than the retention deleted", count)
            except Exception as exc:
                log.warning("webhook outbox: cannot delete old failed deliveries: %s", exc)
            await asyncio.sleep(PRUNE_EVERY)

    async def _rescue(self) -> None:
        """A fleet: what dead bridges left is delivered here."""
        failing = False  # said once per outage
        while True:
            await asyncio.sleep(self.outbox.rescue_interval)
            if not self._ready:
                continue
            try:
                found = await self._io(self.outbox.rescue)
            except Exception as exc:
                if not failing:
                    log.warning("webhooks: cannot look for deliveries that dead bridges left: %s", exc)
                failing = True
                continue
            failing = False
            if found:
                log.warning("webhooks: %d deliveries that a bridge which is gone left are delivered here", len(found))
            self._take(found)

    def _take(self, deliveries: list[Delivery]) -> None:
        """Deliveries the outbox handed over (kept there already): queued unless they are."""
        for delivery in deliveries:
            if delivery.endpoint in self._depth and delivery.key not in self._queued:
                self._enqueue(delivery)

    async def _catch_up_session(self, session_id: str, after: int) -> None:
        while True:
            events = await self.store.read_async(session_id, after, READ_BATCH)
            if not events:
                return
            for event in events:
                self.observe(event)
            after = events[-1].sequence

    # ---- taking events (event loop; never waits) -------------------------------------------
    def observe(self, event: StoredEvent) -> None:
        """A committed event of any session."""
        if event.type not in self.types:
            return
        payload: str | None = None
        for endpoint in self.endpoints:
            if (endpoint, event.session_id, event.sequence) in self._queued:
                continue
            if self._depth[endpoint] >= self.limit:
                self.metrics.webhook_delivery("dropped")
                skipped = self._warnings.admit("dropped " + endpoint)
                if skipped is not None:
                    log.warning(
                        "webhook queue of %s full (%d): %s event %d of session %s not delivered to it%s",
                        shown(endpoint),
                        self.limit,
                        event.type,
                        event.sequence,
                        event.session_id,
                        _more(skipped),
                        extra={"session_id": event.session_id},
                    )
                continue
            payload = payload or payload_of(event)
            delivery = Delivery(endpoint, event.session_id, event.sequence, event.type, payload)
            self._unsaved.append(delivery)
            self._enqueue(delivery)
        if self._unsaved and not self._saving:
            self._saving = True
            asyncio.get_running_loop().call_soon(self._save)

    def _save(self) -> None:
        # Submitted before any post of these deliveries can end: the outbox's thread keeps that order.
        self._saving = False
        batch, self._unsaved = self._unsaved, []
        self._submit(self.outbox.add, batch, then=self._take)

    def _enqueue(self, delivery: Delivery) -> None:
        key = (delivery.endpoint, delivery.session_id)
        queue = self._queues.setdefault(key, [])
        if not queue or queue[-1].sequence < delivery.sequence:
            queue.append(delivery)
        else:  # caught up from the store behind live ones: keep sequence order
            at = bisect.bisect(queue, delivery.sequence, key=lambda d: d.sequence)
            # ... behind the head when a worker is posting it (its outcome removes it).
            queue.insert(max(at, 1) if key in self._workers else at, delivery)
        self._queued.add(delivery.key)
        self._depth[delivery.endpoint] = self._depth.get(delivery.endpoint, 0) + 1
        if self._ready:
            self._work(key)

    def _work(self, key: tuple[str, str]) -> None:
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._deliver_all(key), name=f"webhook-{key[1]}")

    # ---- delivering ------------------------------------------------------------------------
    async def _deliver_all(self, key: tuple[str, str]) -> None:
        queue = self._queues[key]
        try:
            while queue:
                delivery = queue[0]
                wait = delivery.next_at - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                async with self._slots[delivery.endpoint]:
                    error = await self._post(delivery)
                if error is None:
                    self._done(queue, delivery, "delivered")
                    self._submit(self.outbox.delivered, delivery)
                    continue
                delivery.attempts += 1
                if delivery.attempts >= self.attempts:
                    self._done(queue, delivery, "failed")
                    skipped = self._warnings.admit("failed " + delivery.endpoint)
                    if skipped is not None:
                        log.warning(
                            "webhook to %s failed after %d tries, given up: %s event %d of session %s (%s)%s",
                            shown(delivery.endpoint),
                            delivery.attempts,
                            delivery.event_type,
                            delivery.sequence,
                            delivery.session_id,
                            error,
                            _more(skipped),
                            extra={"session_id": delivery.session_id},
                        )
                    self._submit(self.outbox.failed, delivery, error)
                    continue
                self.metrics.webhook_delivery("retried")
                wait = retry_delay(delivery.attempts, self.first_delay, self.max_delay)
                delivery.next_at = time.time() + wait
                skipped = self._warnings.admit("retry " + delivery.endpoint)
                if skipped is not None:
                    log.warning(
                        "webhook to %s: try %d of %s event %d of session %s failed (%s); next try in %.1f s%s",
                        shown(delivery.endpoint),
                        delivery.attempts,
                        delivery.event_type,
                        delivery.sequence,
                        delivery.session_id,
                        error,
                        wait,
                        _more(skipped),
                        extra={"session_id": delivery.session_id},
                    )
                self._submit(self.outbox.retry_later, delivery)
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    def _done(self, queue: list[Delivery], delivery: Delivery, outcome: str) -> None:
        del queue[next(i for i, d in enumerate(queue) if d is delivery)]
        self._queued.discard(delivery.key)
        self._depth[delivery.endpoint] -= 1
        self.metrics.webhook_delivery(outcome)

    async def _post(self, delivery: Delivery) -> str | None:
        """One try; None when the receiver accepted it, else what went wrong."""
        assert self._client is not None
        message_id = webhook_id(delivery.session_id, delivery.sequence)
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": "acp-rest-bridge",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(message_id, now, delivery.payload),
        }
        try:
            # The whole try: httpx's timeout bounds each read, not a receiver that trickles.
            async with asyncio.timeout(self.timeout):
                response = await self._client.post(
                    delivery.endpoint, content=delivery.payload.encode(), headers=headers
                )
        except TimeoutError:
            return f"no whole answer within {self.timeout:g} s"
        except Exception as exc:  # any failure of a try is the receiver's, never the worker's end
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return scrubbed(text, delivery.endpoint)
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    # ---- the outbox's thread ----------------------------------------------------------------
    def _submit(self, method: Callable[..., Any], *args: Any, then: Callable[[Any], None] | None = None) -> None:
        """Run an outbox write on its thread, in order; a failure is logged (the delivery stays queued);
        ``then`` gets the result."""
        future = asyncio.get_running_loop().run_in_executor(self._executor, method, *args)
        self._pending_io.add(future)
        future.add_done_callback(lambda done: self._written(done, then))

    def _written(self, future: asyncio.Future[Any], then: Callable[[Any], None] | None) -> None:
        self._pending_io.discard(future)
        if future.cancelled():
            return
        if future.exception() is not None:
            log.error("webhook outbox write failed: %s", future.exception())
        elif then is not None and future.result():
            then(future.result())

    async def _io(self, method: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, method, *args)
