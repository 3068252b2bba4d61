"""Following another bridge's session (``app/sessions/fleet.py``), two bridges' services in one process
on a real PostgreSQL: the database's notifications only wake readers up; without them (a lost
notification, a listener that reconnects) the poll delivers every event, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from app.events.model import ITEM_DELTA, EventDraft
from app.main import Services
from app.sessions.fleet import Fleet
from app.sessions.remote import RemoteSession
from app.settings import Settings

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def bridges(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Services, Services]]:
    async with AsyncExitStack() as stack:
        out = []
        for name in ("a", "b"):
            services = Services(
                Settings(data_dir=tmp_path / name, database_url=database_url, advertise_url=f"http://{name}.invalid")
            )
            await stack.enter_async_context(services.running())
            out.append(services)
        yield out[0], out[1]


async def follow_burst(a: Services, b: Services, count: int) -> list[int]:
    session = await a.manager.create("s1", {"agent": "mock"})
    await session.log.settled()
    followed = await b.manager.lookup("s1")
    assert isinstance(followed, RemoteSession) and followed.runner == "http://a.invalid"
    start = followed.log.last_sequence
    assert start == session.log.last_sequence
    sub = followed.log.subscribe(start)
    for index in range(count):
        session.log.append(EventDraft(ITEM_DELTA, {"item_id": "itm_1", "native_item_id": None, "delta": f"{index}"}))
        if index % 50 == 0:
            await asyncio.sleep(0)
    got: list[int] = []
    try:
        async with asyncio.timeout(15):
            while len(got) < count:
                got.extend(e.sequence for e in await sub.next_batch())
    except TimeoutError:
        raise AssertionError(
            f"got {len(got)} of {count}; the follower is at {followed.log.last_sequence}, "
            f"the runner at {session.log.last_sequence}"
        ) from None
    assert got == list(range(start + 1, start + count + 1))
    return got


async def test_a_reader_on_another_bridge_gets_every_event_live(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Fleet, "POLL", 3600.0)  # the notifications alone
    async with bridges(tmp_path, database_url) as (a, b):
        await follow_burst(a, b, 500)


async def test_without_notifications_the_poll_delivers_every_event(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def deaf(self: Fleet) -> None:
        await asyncio.Event().wait()  # never listens: every notification is missed

    monkeypatch.setattr(Fleet, "_listen", deaf)
    monkeypatch.setattr(Fleet, "POLL", 0.1)
    async with bridges(tmp_path, database_url) as (a, b):
        await follow_burst(a, b, 500)
