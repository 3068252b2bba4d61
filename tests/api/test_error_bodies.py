"""Failures nobody planned for still answer ProblemDetails JSON: an unexpected exception is a 500,
running out of file descriptors a 503 (in-process: the failures are injected)."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.fs import ops
from app.main import create_app
from app.settings import Settings


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data"))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    # A loopback Host: a server without a token serves no other.
    base_url = "http://127.0.0.1"
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=base_url) as c:
        yield c


async def test_out_of_descriptors_is_503(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_fds(*args: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(ops, "list_entries", no_fds)
    response = await client.get("/v1/fs/entries", params={"path": str(tmp_path)})
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["type"] == "urn:sandbox-agent:error:service_unavailable" and body["status"] == 503
    assert "Too many open files" in body["detail"]


async def test_emfile_inside_an_fs_operation_is_503(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fds(*args: object, **kwargs: object) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr("app.fs.ops.os.open", no_fds)
    response = await client.get("/v1/fs/file", params={"path": "/etc/hostname"})
    assert response.status_code == 503 and response.json()["status"] == 503


async def test_an_unexpected_exception_is_a_problem_details_500(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(ops, "stat_path", broken)
    response = await client.get("/v1/fs/stat", params={"path": "/"})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "type": "urn:sandbox-agent:error:internal_error",
        "title": "Internal Server Error",
        "status": 500,
        "detail": "internal error: ZeroDivisionError",
        "details": {"message": "ZeroDivisionError"},
    }
