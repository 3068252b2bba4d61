"""Message attachments the bridge reads (images for an image-capable agent) go through the /v1/fs
reader: confined to --fs-root, regular files only, capped in size before anything is read."""

from __future__ import annotations

import base64
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Fenced
from tests.support import Bridge, create_session, events

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def post(client: httpx.Client, sid: str, path: str, mime: str = "image/png") -> httpx.Response:
    return client.post(
        f"/v1/sessions/{sid}/messages", json={"message": "look", "attachments": [{"path": path, "mime": mime}]}
    )


def refused(response: httpx.Response, status: int, path: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert path in body["detail"] + str(body.get("details", "")), body
    return body  # type: ignore[no-any-return]


@pytest.fixture
def fenced_client(fenced: Fenced) -> httpx.Client:
    return fenced.bridge.client()


def new_session(client: httpx.Client) -> str:
    sid = f"attach-{uuid.uuid4().hex[:8]}"
    create_session(client, sid)
    return sid


def test_file_outside_the_root_is_refused(fenced: Fenced, fenced_client: httpx.Client) -> None:
    sid = new_session(fenced_client)
    refused(post(fenced_client, sid, "/etc/shadow"), 403, "/etc/shadow")
    link = fenced.root / f"shadow-{sid}.png"
    link.symlink_to("/etc/shadow")
    refused(post(fenced_client, sid, str(link)), 403, str(link))
    # Nothing was accepted: no turn started.
    assert not [e for e in events(fenced_client, sid) if e["type"] == "turn.started"]


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self/environ", "/proc/self/mem"])
def test_devices_and_proc_are_refused_unread(bridge: Bridge, client: httpx.Client, path: str) -> None:
    sid = new_session(client)
    before = rss_kib(bridge.proc.pid)
    refused(post(client, sid, path), 400, path)
    assert rss_kib(bridge.proc.pid) - before < 10_000


def test_fifo_is_refused_without_waiting(fenced: Fenced, fenced_client: httpx.Client) -> None:
    sid = new_session(fenced_client)
    fifo = fenced.root / f"pipe-{sid}.png"
    os.mkfifo(fifo)
    response = post(fenced_client, sid, str(fifo))
    refused(response, 400, str(fifo))


def test_huge_sparse_file_is_refused_before_reading(fenced: Fenced, fenced_client: httpx.Client) -> None:
    sid = new_session(fenced_client)
    big = fenced.root / f"big-{sid}.png"
    with open(big, "wb") as fh:
        fh.truncate(300 * 1024 * 1024)  # sparse: takes no disk
    pid = fenced.bridge.proc.pid
    before = rss_kib(pid)
    started = time.monotonic()
    body = refused(post(fenced_client, sid, str(big)), 400, str(big))
    elapsed = time.monotonic() - started
    assert "too large" in body["detail"]
    assert rss_kib(pid) - before < 10_000
    assert elapsed < 1.0, elapsed  # nothing was read (the figure for 100 ms is in the report)
    big.unlink()


def test_image_inside_the_root_reaches_the_agent(fenced: Fenced, fenced_client: httpx.Client) -> None:
    sid = new_session(fenced_client)
    image = fenced.root / f"dot-{sid}.png"
    image.write_bytes(PNG)
    assert post(fenced_client, sid, str(image)).status_code == 204
    started = [e for e in events(fenced_client, sid, include_raw="true") if e["type"] == "turn.started" or "raw" in e]
    raw = str([e.get("raw") for e in started])
    assert base64.b64encode(PNG).decode() in raw


def test_missing_image_is_sent_as_a_link(client: httpx.Client) -> None:
    sid = new_session(client)
    assert post(client, sid, "/nonexistent/shot.png").status_code == 204
