"""--fs-root against a client that turns its own uploads into links out of the root, and a local
process that swaps links and directories while requests run: nothing outside the roots is read,
written or deleted (a sentinel tree beside the root, compared before and after)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import Fenced
from tests.e2e.test_client_services import assistant_text, turn
from tests.support import create_session, wait_until
from tests.unit.test_fs import make_tar

SECRET = b"SENTINEL-outside-the-root"


def snapshot(top: Path) -> dict[str, str]:
    """Every entry under ``top``: type, content hash or link target, mode and mtime."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            if path.is_symlink():
                kind = "link:" + os.readlink(path)
            elif path.is_dir():
                kind = "dir"
            else:
                kind = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(top))] = f"{kind} {st.st_mode:o} {st.st_mtime_ns}"
    st = top.lstat()
    out["."] = f"{st.st_mode:o} {st.st_mtime_ns}"
    return out


def sentinel(fenced: Fenced) -> Path:
    """A tree outside the root the attacks aim at (beside it, not in the outside directory other
    tests list): files, a directory, a nested file."""
    top = fenced.root.parent / f"sentinel-{uuid.uuid4().hex[:6]}"
    (top / "dir" / "deep").mkdir(parents=True)
    for rel in ("f.txt", "new.txt", "t.txt", "dir/f.txt", "dir/deep/f.txt"):
        (top / rel).write_bytes(SECRET)
    return top


def test_an_uploaded_link_moved_onto_an_upload_in_progress_does_not_lead_out(fenced: Fenced) -> None:
    """The attack with HTTP requests alone: upload a link that stays inside its destination, move
    it up to the root where it points out, then move it onto the name an upload is about to create
    while that upload's body is still arriving."""
    client = fenced.bridge.client()
    tag = uuid.uuid4().hex[:6]
    root = fenced.root
    target = sentinel(fenced)  # a sibling of the root: ../<sentinel> from it
    before = snapshot(target)
    up = os.path.relpath(target, root)
    assert up.count("..") == 1
    # Inside its destination, a/l -> ../<sentinel> stays there: accepted.
    dest = root / f"attack-{tag}"
    accepted = client.post(
        "/v1/fs/upload-batch",
        params={"path": str(dest)},
        content=make_tar([("a/", None)], links={"a/l": (b"2", up)}),
        headers={"content-type": "application/x-tar"},
    )
    assert accepted.status_code == 200, accepted.text
    assert os.readlink(dest / "a" / "l") == up

    link = root / f"l-{tag}"
    moved = client.post("/v1/fs/move", json={"from": str(dest / "a" / "l"), "to": str(link)})
    assert moved.status_code == 200, moved.text
    assert link.resolve() == target  # now it leads out

    fresh = root / f"fresh-{tag}"
    payload = make_tar([("f.txt", b"overwritten"), ("dir/f.txt", b"overwritten"), ("planted.txt", b"planted")])
    half = len(payload) // 2
    mover = fenced.bridge.client()

    def body() -> Iterator[bytes]:
        yield payload[:half]
        # The upload has begun (its staging directory is there): swap the link in under its name.
        assert wait_until(lambda: any(n.startswith(".upload") for n in os.listdir(root)), 15)
        swapped = mover.post("/v1/fs/move", json={"from": str(link), "to": str(fresh)})
        assert swapped.status_code == 200, swapped.text
        yield payload[half:]

    response = client.post(
        "/v1/fs/upload-batch",
        params={"path": str(fresh)},
        content=body(),
        headers={"content-type": "application/x-tar"},
    )
    assert snapshot(target) == before, "the upload wrote outside the root"
    assert response.status_code == 403, response.text
    assert response.json()["type"] == "urn:sandbox-agent:error:permission_denied"
    assert not any(n.startswith(".upload") for n in os.listdir(root))


# ---- a loop of swaps against every route -------------------------------------------------------------
class Swapper:
    """A local process that keeps flipping names inside the root between a real directory, a link
    out of the root and nothing, by atomic renames, until stopped."""

    def __init__(self, root: Path, target: Path, names: list[str]) -> None:
        self.root, self.target, self.names = root, target, names
        self.stop = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        spare_dir = self.root / ".spare-dir"
        spare_link = self.root / ".spare-link"
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            for name in self.names:
                path = self.root / name
                try:
                    if not spare_dir.exists():
                        spare_dir.mkdir()
                        (spare_dir / "f.txt").write_text("inside")
                        (spare_dir / "dir").mkdir()
                        (spare_dir / "dir" / "f.txt").write_text("inside")
                    if not spare_link.is_symlink():
                        spare_link.symlink_to(self.target)
                    # The name is a directory, then a link out, then gone, then a directory again.
                    os.rename(spare_dir, path)
                    os.rename(path, spare_dir)
                    os.rename(spare_link, path)
                    os.rename(path, spare_link)
                    self.flips += 1
                except OSError:
                    # A request made the name meanwhile (a PUT's parents, an upload): clear it.
                    if path.is_symlink():
                        path.unlink(missing_ok=True)
                    elif path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    elif path.exists():
                        path.unlink(missing_ok=True)

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def requests_through(client: httpx.Client, base: Path, i: int) -> list[httpx.Response]:
    """One request of every fs route (and upload-batch) whose path goes through ``base``."""
    tar = make_tar([("t.txt", b"t%d" % i), ("dir/", None), ("dir/f.txt", b"u")])
    p = str(base)
    return [
        client.get("/v1/fs/entries", params={"path": p}),
        client.get("/v1/fs/entries", params={"path": f"{p}/dir"}),
        client.get("/v1/fs/file", params={"path": f"{p}/f.txt"}),
        client.get("/v1/fs/file", params={"path": f"{p}/dir/f.txt"}),
        client.get("/v1/fs/stat", params={"path": f"{p}/dir/deep"}),
        client.put("/v1/fs/file", params={"path": f"{p}/f.txt"}, content=b"w%d" % i),
        client.put("/v1/fs/file", params={"path": f"{p}/new.txt"}, content=b"n%d" % i),
        client.put("/v1/fs/file", params={"path": f"{p}/dir/deep/f.txt"}, content=b"d%d" % i),
        client.post("/v1/fs/mkdir", params={"path": f"{p}/made/deep"}),
        client.post("/v1/fs/move", json={"from": f"{p}/f.txt", "to": f"{p}/moved.txt", "overwrite": True}),
        client.post("/v1/fs/move", json={"from": f"{p}/dir", "to": f"{p}/dir2", "overwrite": True}),
        client.post(
            "/v1/fs/upload-batch", params={"path": p}, content=tar, headers={"content-type": "application/x-tar"}
        ),
        client.post(
            "/v1/fs/upload-batch",
            params={"path": f"{p}/dir"},
            content=tar,
            headers={"content-type": "application/x-tar"},
        ),
        client.delete("/v1/fs/entry", params={"path": f"{p}/dir/f.txt"}),
        client.delete("/v1/fs/entry", params={"path": f"{p}/dir", "recursive": "true"}),
        client.delete("/v1/fs/entry", params={"path": f"{p}/t.txt"}),
    ]


def agent_requests_through(client: httpx.Client, session: str, base: Path, i: int) -> list[dict[str, Any]]:
    """The agent's reads and writes (ACP ``fs/*``) through ``base``, as the client probe answers them."""
    calls = [
        ("fs/read_text_file", {"path": f"{base}/f.txt"}),
        ("fs/read_text_file", {"path": f"{base}/dir/deep/f.txt"}),
        ("fs/write_text_file", {"path": f"{base}/f.txt", "content": f"agent {i}"}),
        ("fs/write_text_file", {"path": f"{base}/dir/f.txt", "content": f"agent {i}"}),
        ("fs/write_text_file", {"path": f"{base}/agent/new.txt", "content": f"agent {i}"}),
    ]
    reply = assistant_text(turn(client, session, json.dumps(calls)))
    answers: list[dict[str, Any]] = json.loads(reply)["responses"]
    return answers


def test_swapping_links_and_directories_during_every_route_never_touches_the_outside(fenced: Fenced) -> None:
    """Every /v1/fs route, upload-batch and the agents' fs/* requests, while a name on their paths
    keeps turning into a directory, a link out of the root and nothing (bounded: 60 rounds, 40 s)."""
    client = fenced.bridge.client()
    tag = uuid.uuid4().hex[:6]
    work = fenced.root / f"swaps-{tag}"
    work.mkdir()
    target = sentinel(fenced)
    before = snapshot(target)
    statuses: set[int] = set()
    rounds = 0
    deadline = time.monotonic() + 40
    session = f"swaps-{tag}"
    create_session(client, session, agent="client-probe")
    agent_answers: list[dict[str, Any]] = []
    with Swapper(work, target, ["flip"]) as swapper:
        while rounds < 60 and time.monotonic() < deadline:
            for response in requests_through(client, work / "flip", rounds):
                statuses.add(response.status_code)
                assert SECRET not in response.content, response.request.url
            if rounds % 3 == 0:  # the agents' fs/* requests, a few per turn
                agent_answers += agent_requests_through(client, session, work / "flip", rounds)
            rounds += 1
    assert not any(SECRET.decode() in json.dumps(answer) for answer in agent_answers)
    assert {"result": {}} in agent_answers  # some agent writes went through, inside the root
    print(f"{rounds} rounds of 16 requests, {len(agent_answers)} agent fs/* requests, {swapper.flips} swaps,")
    print(f"statuses {sorted(statuses)}")
    assert snapshot(target) == before
    assert "Traceback" not in fenced.bridge.log()
    assert statuses <= {200, 400, 403, 502}, statuses
    assert 200 in statuses and 403 in statuses
    assert swapper.flips > 20
    assert rounds >= 10
