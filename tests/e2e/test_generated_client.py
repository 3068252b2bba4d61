"""A Python client generated from the served /openapi.json (openapi-python-client) drives a whole
mock session against a real server: create, message, events with offset/limit, a permission reply,
an fs upload and read-back, terminate."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support import Bridge, start_bridge, until_type, wait_for_events

PACKAGE = "bridge_client"
# The mock asks one permission (to run `ls`) for this prompt.
LIST_FILES = "List files in the current directory using available tools."
CONFIG = """\
post_hooks: []
"""


def generate(bridge: Bridge, out: Path) -> None:
    spec = out / "openapi.json"
    spec.write_bytes(httpx.get(bridge.url + "/openapi.json", timeout=10).raise_for_status().content)
    config = out / "config.yaml"
    config.write_text(CONFIG)
    generator = Path(sys.executable).with_name("openapi-python-client")
    argv = [str(generator), "generate", "--path", str(spec), "--meta", "none", "--config", str(config)]
    result = subprocess.run(
        [*argv, "--output-path", str(out / PACKAGE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bridge, ModuleType, Path]]:
    tmp = tmp_path_factory.mktemp("generated-client")
    bridge = start_bridge(tmp)
    out = tmp / "gen"
    out.mkdir()
    try:
        generate(bridge, out)
        sys.path.insert(0, str(out))
        try:
            yield bridge, importlib.import_module(PACKAGE), tmp
        finally:
            sys.path.remove(str(out))
            for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
                del sys.modules[name]
    finally:
        bridge.stop()


def api(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.{name}")


def models() -> Any:
    return importlib.import_module(f"{PACKAGE}.models")


def wait_events(bridge: Bridge, client: Any, session_id: str, until: str, offset: int = 0) -> list[Any]:
    """Waits on the SSE stream (which the generated client does not parse) for an event of type
    ``until``, then reads the same events as a typed page through the generated client."""
    seen = wait_for_events(bridge.client(), session_id, until_type(until), offset=offset)
    page = api("sessions.get_events").sync(session_id, client=client, offset=offset, limit=len(seen))
    assert isinstance(page, models().EventsResponse), page
    assert [e.sequence for e in page.events] == [e["sequence"] for e in seen]
    return list(page.events)


def test_generated_client_drives_a_mock_session(generated: tuple[Bridge, ModuleType, Path]) -> None:
    bridge, package, tmp = generated
    m = models()
    client = package.Client(base_url=bridge.url, raise_on_unexpected_status=True, timeout=httpx.Timeout(20))

    health = api("meta.get_health").sync(client=client)
    assert health is not None and health.status == "ok"
    agents = api("agents.list_agents").sync(client=client)
    assert "mock" in [a.id for a in agents.agents]

    created = api("sessions.create_session").sync(
        "gen", client=client, body=m.CreateSessionRequest(agent="mock", permission_mode="plan")
    )
    assert isinstance(created, m.CreateSessionResponse) and created.healthy is True
    conflict = api("sessions.create_session").sync("gen", client=client, body=m.CreateSessionRequest(agent="mock"))
    assert isinstance(conflict, m.ProblemDetails) and conflict.status == 409

    post = api("sessions.post_message")
    assert post.sync_detailed("gen", client=client, body=m.MessageRequest(message="hello")).status_code == 204
    first = wait_events(bridge, client, "gen", "turn.ended")
    assert [e.sequence for e in first] == list(range(1, len(first) + 1))

    # offset/limit paging, typed all the way down
    get_events = api("sessions.get_events")
    page = get_events.sync("gen", client=client, offset=1, limit=2, include_raw=True)
    assert [e.sequence for e in page.events] == [2, 3] and page.has_more is True
    assert all(e.raw is not None for e in page.events)
    texts = [
        part.text
        for e in first
        if isinstance(e.data, m.ItemEventData)
        for part in e.data.item.content
        if getattr(part, "text", None)
    ]
    assert "hello" in texts

    # a permission request, answered through the generated client
    assert post.sync_detailed("gen", client=client, body=m.MessageRequest(message=LIST_FILES)).status_code == 204
    last = first[-1].sequence
    requested = wait_events(bridge, client, "gen", "permission.requested", offset=last)
    asked = next(e for e in requested if e.type_.value == "permission.requested")
    assert isinstance(asked.data, m.PermissionEventData)
    reply = api("sessions.reply_permission").sync_detailed(
        "gen",
        asked.data.permission_id,
        client=client,
        body=m.PermissionReplyRequest(reply=m.PermissionReply.ONCE),
    )
    assert reply.status_code == 204
    resolved = wait_events(bridge, client, "gen", "permission.resolved", offset=asked.sequence)
    assert "permission.resolved" in [e.type_.value for e in resolved]

    # fs: a tar upload (the legacy document's octet-stream body), then the files read back
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("a.txt", b"alpha"), ("dir/b.txt", b"beta")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    types_module = importlib.import_module(f"{PACKAGE}.types")
    dest = tmp / "uploaded"
    uploaded = api("fs.fs_upload_batch").sync(
        client=client, body=types_module.File(payload=io.BytesIO(buffer.getvalue())), path=str(dest)
    )
    assert isinstance(uploaded, m.FsUploadBatchResponse), uploaded
    assert sorted(uploaded.paths) == [str(dest / "a.txt"), str(dest / "dir" / "b.txt")]
    assert (dest / "dir" / "b.txt").read_bytes() == b"beta"
    stat = api("fs.fs_stat").sync(client=client, path=str(dest / "a.txt"))
    assert isinstance(stat, m.FsStat) and stat.size == 5 and stat.entry_type == m.FsEntryType.FILE
    entries = api("fs.fs_entries").sync(client=client, path=str(dest))
    assert sorted(e.name for e in entries) == ["a.txt", "dir"]

    sessions = api("sessions.list_sessions").sync(client=client)
    assert [s.session_id for s in sessions.sessions] == ["gen"]
    assert api("sessions.terminate_session").sync_detailed("gen", client=client).status_code == 204
    missing = api("sessions.terminate_session").sync("nope", client=client)
    assert isinstance(missing, m.ProblemDetails) and missing.status == 404
    # The real 400 of a message to an ended session is declared, so it arrives typed too.
    ended = post.sync("gen", client=client, body=m.MessageRequest(message="again"))
    assert isinstance(ended, m.ProblemDetails) and ended.status == 400
    assert ended.detail == "invalid request: session terminated"
