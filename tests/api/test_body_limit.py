"""A body over the limit gets the legacy 413 with legacy's words first, then the limit and the
setting that raises it (also as the ``details`` extension), whether its length is announced or it
comes chunked; nothing of it is written (in-process)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

MIB = 1024 * 1024
LEGACY = "invalid request: Failed to buffer the request body: length limit exceeded"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data"))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
    ):
        yield c


def assert_names_the_limit(response: httpx.Response, limit: int, words: str) -> None:
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["type"] == "urn:sandbox-agent:error:invalid_request" and body["status"] == 413
    assert body["detail"] == (
        f"{LEGACY} (this server takes bodies up to {words}, {limit} bytes; ACP_BRIDGE_BODY_LIMIT sets it)"
    )
    assert body["details"] == {"limit": limit, "setting": "ACP_BRIDGE_BODY_LIMIT"}


async def test_a_3_mb_upload_is_told_the_2_mib_limit_and_its_setting(client: httpx.AsyncClient, tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    response = await client.put("/v1/fs/file", params={"path": str(target)}, content=b"x" * 3_000_000)
    assert_names_the_limit(response, 2 * MIB, "2 MiB")
    assert not target.exists()


async def test_a_chunked_body_is_told_the_same_when_it_passes_the_limit(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"x" * MIB

    target = tmp_path / "chunked.bin"
    response = await client.put("/v1/fs/file", params={"path": str(target)}, content=chunks())
    assert_names_the_limit(response, 2 * MIB, "2 MiB")
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name != "data"] == []  # no temporary file left


async def test_the_setting_named_is_the_one_that_sets_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_BRIDGE_BODY_LIMIT", "1536")
    app = create_app(Settings(data_dir=tmp_path / "data"))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
    ):
        response = await c.post("/v1/sessions/s1", json={"agent": "mock", "padding": "x" * 2000})
        assert_names_the_limit(response, 1536, "1.5 KiB")
