"""Huge ``limit``/``offset`` values on ``GET /events`` of a session whose events are read from the
store (not the memory tail): a complete page, or legacy's 400 past u64, never a cut body. A real
bridge process."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support import Bridge, create_session, send, start_bridge, until_type, wait_for_events

U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    server = start_bridge(tmp_path_factory.mktemp("paging"))
    client = server.client()
    create_session(client, "big")
    # More events than one batch of the store (4096): a long page is streamed as it is read.
    send(client, "big", "burst 5000 8")
    wait_for_events(client, "big", until_type("turn.ended"))
    # An ended session keeps no events in memory: every page is read from the store.
    assert client.post("/v1/sessions/big/terminate").status_code == 204
    wait_for_events(client, "big", until_type("session.ended"))
    yield server
    server.stop()


def page(client: httpx.Client, **params: int | str) -> httpx.Response:
    response = client.get("/v1/sessions/big/events", params=params)
    response.read()  # a cut chunked body raises here
    return response


@pytest.mark.parametrize("limit", [I64_MAX, I64_MAX + 1, U64_MAX, 10**6])
def test_a_huge_limit_is_a_complete_page_of_everything(bridge: Bridge, limit: int) -> None:
    client = bridge.client()
    everything = page(client).json()["events"]
    assert len(everything) > 5000
    response = page(client, limit=limit)
    assert response.status_code == 200
    assert response.json() == {"events": everything, "hasMore": False}
    response = page(client, limit=limit, offset=1)
    assert response.json() == {"events": everything[1:], "hasMore": False}


@pytest.mark.parametrize("offset", [I64_MAX, I64_MAX + 1, U64_MAX])
def test_a_huge_offset_is_an_empty_page(bridge: Bridge, offset: int) -> None:
    for params in ({"offset": offset}, {"offset": offset, "limit": U64_MAX}, {"offset": offset, "limit": 1}):
        response = page(bridge.client(), **params)
        assert (response.status_code, response.json()) == (200, {"events": [], "hasMore": False}), params


def test_past_u64_is_legacy_s_400(bridge: Bridge) -> None:
    for name in ("limit", "offset"):
        response = page(bridge.client(), **{name: U64_MAX + 1})
        assert response.status_code == 400
        assert "number too large to fit in target type" in response.json()["detail"]
