"""/v1/fs/* over a real bridge: the legacy checklist (behavior §11), path and error rules (§8), binary
and unicode data, all-or-nothing writes and uploads, the body limit, and optional confinement."""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Fenced
from tests.support import Bridge, create_session
from tests.unit.test_fs import make_tar

MIB = 1024 * 1024
MODIFIED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?\+00:00")


def problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, object] = response.json()
    return body


def detail(response: httpx.Response, status: int) -> object:
    return problem(response, status)["detail"]


def put(client: httpx.Client, path: str, data: bytes, **params: str) -> httpx.Response:
    return client.put("/v1/fs/file", params={"path": path, **params}, content=data)


def tar_upload(
    client: httpx.Client, data: bytes, content_type: str = "application/x-tar", **params: str
) -> httpx.Response:
    return client.post("/v1/fs/upload-batch", params=params, content=data, headers={"content-type": content_type})


def listing(path: Path) -> list[str]:
    return sorted(os.listdir(path))


# ---- the legacy checklist ----------------------------------------------------------------------
def test_put_get_entries_move_delete(client: httpx.Client, tmp_path: Path) -> None:
    path = tmp_path / "file.txt"
    written = put(client, str(path), b"hello fs")
    assert written.status_code == 200
    assert written.json() == {"path": str(path), "bytesWritten": 8}

    read = client.get("/v1/fs/file", params={"path": str(path)})
    assert read.status_code == 200
    assert read.headers["content-type"] == "application/octet-stream"
    assert read.content == b"hello fs"

    entries = client.get("/v1/fs/entries", params={"path": str(tmp_path)})
    assert entries.status_code == 200
    assert [e["name"] for e in entries.json()] == ["file.txt"]

    put(client, str(tmp_path / "moved.txt"), b"old")
    body = {"from": str(path), "to": str(tmp_path / "moved.txt"), "overwrite": True}
    moved = client.post("/v1/fs/move", json=body)
    assert moved.status_code == 200
    assert moved.json() == {"from": str(path), "to": str(tmp_path / "moved.txt")}
    assert (tmp_path / "moved.txt").read_bytes() == b"hello fs"
    assert not path.exists()

    deleted = client.delete("/v1/fs/entry", params={"path": str(tmp_path / "moved.txt")})
    assert deleted.status_code == 200
    assert deleted.json() == {"path": str(tmp_path / "moved.txt")}
    assert listing(tmp_path) == []


def test_upload_batch_extracts_files(client: httpx.Client, tmp_path: Path) -> None:
    dest = tmp_path / "upload"
    response = tar_upload(client, make_tar([("a.txt", b"A"), ("nested/b.txt", b"B")]), path=str(dest))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == {"paths": [str(dest / "a.txt"), str(dest / "nested" / "b.txt")], "truncated": False}
    assert (dest / "a.txt").read_bytes() == b"A"
    assert (dest / "nested" / "b.txt").read_bytes() == b"B"


def test_upload_of_1030_entries_lists_1024(client: httpx.Client, tmp_path: Path) -> None:
    response = tar_upload(client, make_tar([(f"f{i}.txt", b"") for i in range(1030)]), path=str(tmp_path))
    assert response.status_code == 200, response.text
    assert len(response.json()["paths"]) == 1024
    assert response.json()["truncated"] is True
    assert len(listing(tmp_path)) == 1030


def test_relative_paths_with_a_session_resolve_against_the_server_cwd(client: httpx.Client, bridge: Bridge) -> None:
    create_session(client, "fs-relative")
    server_cwd = bridge.data_dir.parent  # start_bridge runs the server there
    for spelling in ("session_id", "sessionId"):
        name = f"rel-{spelling}.txt"
        written = put(client, f"./sub/{name}", b"rel", **{spelling: "fs-relative"})
        assert written.json() == {"path": str(server_cwd / "sub" / name), "bytesWritten": 3}
        assert (server_cwd / "sub" / name).read_bytes() == b"rel"
        stat = client.get("/v1/fs/stat", params={"path": f"sub/{name}", spelling: "fs-relative"})
        assert stat.json()["path"] == str(server_cwd / "sub" / name)
    entries = client.get("/v1/fs/entries", params={"sessionId": "fs-relative"})  # default path "."
    assert "sub" in {e["name"] for e in entries.json()}
    uploaded = tar_upload(client, make_tar([("up.txt", b"u")]), path="sub", session_id="fs-relative")
    assert uploaded.json()["paths"] == [str(server_cwd / "sub" / "up.txt")]
    moved = client.post(
        "/v1/fs/move", params={"sessionId": "fs-relative"}, json={"from": "sub/up.txt", "to": "sub/moved/up.txt"}
    )
    assert moved.json() == {
        "from": str(server_cwd / "sub" / "up.txt"),
        "to": str(server_cwd / "sub" / "moved" / "up.txt"),
    }
    assert (
        client.post("/v1/fs/move", params={"sessionId": "fs-relative"}, json={"from": "../x", "to": "y"}).status_code
        == 400
    )


def test_mkdir_stat_and_recursive_delete(client: httpx.Client, tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b" / "c"
    made = client.post("/v1/fs/mkdir", params={"path": str(nested)})
    assert made.status_code == 200
    assert made.json() == {"path": str(nested)}
    assert nested.is_dir()
    assert client.post("/v1/fs/mkdir", params={"path": str(nested)}).status_code == 200  # like mkdir -p

    stat = client.get("/v1/fs/stat", params={"path": str(nested)}).json()
    assert stat["entryType"] == "directory"
    assert set(stat) == {"path", "entryType", "size", "modified"}
    put(client, str(nested / "f"), b"12345")
    stat = client.get("/v1/fs/stat", params={"path": str(nested / "f")}).json()
    assert stat["entryType"] == "file" and stat["size"] == 5
    assert MODIFIED.fullmatch(stat["modified"])

    deleted = client.delete("/v1/fs/entry", params={"path": str(tmp_path / "a"), "recursive": "true"})
    assert deleted.status_code == 200
    assert not (tmp_path / "a").exists()


# ---- data ----------------------------------------------------------------------------------------------
def test_binary_round_trip_of_all_byte_values(client: httpx.Client, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4
    path = str(tmp_path / "bytes.bin")
    assert put(client, path, data).json()["bytesWritten"] == 1024
    assert client.get("/v1/fs/file", params={"path": path}).content == data
    # any content type is accepted
    typed = client.put("/v1/fs/file", params={"path": path}, content=data[::-1], headers={"content-type": "text/plain"})
    assert typed.status_code == 200
    assert Path(path).read_bytes() == data[::-1]


def test_unicode_names(client: httpx.Client, tmp_path: Path) -> None:
    name = "ünïcødé 文件 🚀 #?&.txt"
    path = tmp_path / "dír ü" / name
    assert put(client, str(path), "ок".encode()).json()["path"] == str(path)
    assert client.get("/v1/fs/file", params={"path": str(path)}).content == "ок".encode()
    entries = client.get("/v1/fs/entries", params={"path": str(path.parent)}).json()
    assert [(e["name"], e["path"]) for e in entries] == [(name, str(path))]
    response = tar_upload(client, make_tar([("ğ/ř.txt", b"x")]), path=str(tmp_path / "ü"))
    assert response.json()["paths"] == [str(tmp_path / "ü" / "ğ" / "ř.txt")]


def test_put_replaces_a_file_without_leaving_temporary_files(client: httpx.Client, tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    for content in (b"first version", b"second", b""):
        assert put(client, str(path), content).status_code == 200
        assert path.read_bytes() == content
    assert listing(tmp_path) == ["f.txt"]


def test_entries_shape_and_symlinks(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / ".hidden").write_text("h")
    (tmp_path / "link-to-dir").symlink_to(tmp_path / "dir")
    entries = {e["name"]: e for e in client.get("/v1/fs/entries", params={"path": str(tmp_path)}).json()}
    assert set(entries) == {"dir", ".hidden", "link-to-dir"}
    for entry in entries.values():
        assert list(entry) == ["name", "path", "entryType", "size", "modified"]
        assert entry["path"] == str(tmp_path / entry["name"])
        assert MODIFIED.fullmatch(entry["modified"])
    assert entries["dir"]["entryType"] == "directory"
    assert entries["link-to-dir"]["entryType"] == "file"  # the entry's own metadata
    stat = client.get("/v1/fs/stat", params={"path": str(tmp_path / "link-to-dir")}).json()
    assert stat["entryType"] == "directory"  # stat follows symlinks


def test_relative_paths_without_a_session_use_home(client: httpx.Client) -> None:
    home = os.path.expanduser("~")
    assert client.get("/v1/fs/stat", params={"path": "."}).json()["path"] == home
    assert client.get("/v1/fs/stat", params={"path": ""}).json()["path"] == home


# ---- errors --------------------------------------------------------------------------------------------
def test_error_codes(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "dir" / "child").mkdir(parents=True)
    (tmp_path / "file").write_text("x")
    missing = tmp_path / "missing"

    assert client.get("/v1/fs/file").status_code == 400  # path is required
    assert client.get("/v1/fs/stat", params={"path": "x", "session_id": "a", "sessionId": "a"}).status_code == 400
    assert client.delete("/v1/fs/entry", params={"path": str(missing), "recursive": "1"}).status_code == 400

    assert (
        detail(client.get("/v1/fs/stat", params={"path": "../etc"}), 400)
        == "invalid request: invalid relative path: ../etc"
    )
    body = problem(client.get("/v1/fs/stat", params={"path": "x", "sessionId": "nope"}), 404)
    assert body["type"] == "urn:sandbox-agent:error:session_not_found" and body["sessionId"] == "nope"

    not_found = f"invalid request: path not found: {missing}"
    assert detail(client.get("/v1/fs/stat", params={"path": str(missing)}), 400) == not_found
    assert detail(client.get("/v1/fs/file", params={"path": str(missing)}), 400) == not_found
    assert detail(client.get("/v1/fs/entries", params={"path": str(missing)}), 400) == not_found
    assert detail(client.delete("/v1/fs/entry", params={"path": str(missing)}), 400) == not_found
    move = client.post("/v1/fs/move", json={"from": str(missing), "to": str(tmp_path / "x")})
    assert detail(move, 400) == not_found

    assert detail(client.get("/v1/fs/entries", params={"path": str(tmp_path / "file")}), 400) == (
        f"invalid request: path is not a directory: {tmp_path / 'file'}"
    )
    assert detail(client.get("/v1/fs/file", params={"path": str(tmp_path / "dir")}), 400) == (
        f"invalid request: path is not a file: {tmp_path / 'dir'}"
    )
    move = client.post("/v1/fs/move", json={"from": str(tmp_path / "file"), "to": str(tmp_path / "dir")})
    assert detail(move, 400) == f"invalid request: destination already exists: {tmp_path / 'dir'}"

    not_empty = problem(client.delete("/v1/fs/entry", params={"path": str(tmp_path / "dir")}), 502)
    assert not_empty["type"] == "urn:sandbox-agent:error:stream_error"
    assert not_empty["details"] == {"message": "Directory not empty (os error 39)"}
    assert not_empty["detail"] == "stream error: Directory not empty (os error 39)"
    exists = problem(client.post("/v1/fs/mkdir", params={"path": str(tmp_path / "file")}), 502)
    assert exists["details"] == {"message": "File exists (os error 17)"}
    assert problem(put(client, str(tmp_path / "dir"), b"x"), 502)["details"] == {
        "message": "Is a directory (os error 21)"
    }
    assert client.post("/v1/fs/move", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    assert listing(tmp_path) == ["dir", "file"]


# ---- uploads that fail leave nothing behind ---------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("../escape.txt", "invalid relative path: ../escape.txt"),
        ("ok/../../escape.txt", "invalid relative path: ok/../../escape.txt"),
        ("/tmp/escape.txt", "invalid relative path: /tmp/escape.txt"),
    ],
)
def test_escaping_tar_entries_are_refused(client: httpx.Client, tmp_path: Path, entry: str, message: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("keep")
    data = make_tar([("first.txt", b"1"), (entry, b"evil"), ("last.txt", b"2")])
    assert detail(tar_upload(client, data, path=str(dest)), 400) == f"invalid request: {message}"
    assert listing(tmp_path) == ["dest"]
    assert listing(dest) == ["keep.txt"]
    assert not Path("/tmp/escape.txt").exists()


def test_failed_uploads_leave_the_destination_as_it_was(client: httpx.Client, tmp_path: Path) -> None:
    good = make_tar([("a.txt", b"a"), ("b/c.txt", b"c")])
    new_dest = tmp_path / "new" / "dest"
    for data in (gzip.compress(good), b"\x00garbage" * 200, good[:600]):
        response = tar_upload(client, data, path=str(new_dest))
        assert problem(response, 502)["type"] == "urn:sandbox-agent:error:stream_error"
    assert listing(tmp_path) == []  # not even the destination was created

    wrong_type = tar_upload(client, good, content_type="text/plain", path=str(new_dest))
    assert (
        detail(wrong_type, 400) == "invalid request: content-type must be application/x-tar or application/octet-stream"
    )
    assert client.post("/v1/fs/upload-batch", params={"path": str(new_dest)}, content=good).status_code == 400
    assert listing(tmp_path) == []

    # a conflict half-way through is rolled back: a.txt keeps its old content
    existing = tmp_path / "existing"
    (existing / "z").mkdir(parents=True)
    (existing / "a.txt").write_text("old")
    data = make_tar([("a.txt", b"new"), ("n.txt", b"n"), ("z", b"file over a directory")])
    assert problem(tar_upload(client, data, path=str(existing)), 502)["details"] == {
        "message": "Is a directory (os error 21)"
    }
    assert listing(existing) == ["a.txt", "z"]
    assert (existing / "a.txt").read_text() == "old"

    accepted = tar_upload(client, good, content_type="application/x-tar; charset=binary", path=str(new_dest))
    assert accepted.status_code == 200
    # the legacy document's media type is accepted too
    again = tar_upload(client, good, content_type="application/octet-stream", path=str(tmp_path / "other"))
    assert again.status_code == 200, again.text


# ---- body limit --------------------------------------------------------------------------------------
def test_bodies_over_two_mib_are_refused_and_leave_nothing(client: httpx.Client, tmp_path: Path) -> None:
    exactly = put(client, str(tmp_path / "limit.bin"), b"x" * (2 * MIB))
    assert exactly.status_code == 200
    assert put(client, str(tmp_path / "over" / "big.bin"), b"x" * (2 * MIB + 1)).status_code == 413

    def chunks(total: int) -> Iterator[bytes]:
        for _ in range(total // (256 * 1024)):
            yield b"y" * (256 * 1024)

    # no Content-Length: the limit trips while the body is being written to disk
    streamed = client.put("/v1/fs/file", params={"path": str(tmp_path / "over" / "big.bin")}, content=chunks(3 * MIB))
    assert streamed.status_code == 413
    tar = make_tar([("big.bin", b"z" * (3 * MIB))])
    assert tar_upload(client, tar, path=str(tmp_path / "over")).status_code == 413
    chunked_tar = client.post(
        "/v1/fs/upload-batch",
        params={"path": str(tmp_path / "over")},
        content=iter([tar[i : i + 65536] for i in range(0, len(tar), 65536)]),
        headers={"content-type": "application/x-tar"},
    )
    assert chunked_tar.status_code == 413
    assert listing(tmp_path) == ["limit.bin"]


# ---- a bridge with confinement and a larger body limit ----------------------------------------------
def test_body_limit_is_configurable(fenced: Fenced) -> None:
    root = fenced.root / "limit"
    client = fenced.bridge.client()
    data = os.urandom(5 * MIB)
    assert put(client, str(root / "big.bin"), data).json() == {"path": str(root / "big.bin"), "bytesWritten": 5 * MIB}
    assert client.get("/v1/fs/file", params={"path": str(root / "big.bin")}).content == data
    assert put(client, str(root / "bigger.bin"), b"x" * (6 * MIB + 1)).status_code == 413
    assert not (root / "bigger.bin").exists()


def test_confinement_refuses_paths_outside_the_roots(fenced: Fenced) -> None:
    root, outside = fenced.root / "confined", fenced.outside / "api"
    root.mkdir()
    outside.mkdir()
    client = fenced.bridge.client()
    (outside / "secret.txt").write_text("secret")
    (root / "escape").symlink_to(outside)
    (root / "secret-link").symlink_to(outside / "secret.txt")
    target = str(outside / "secret.txt")

    attempts = [
        client.get("/v1/fs/file", params={"path": target}),
        client.get("/v1/fs/file", params={"path": str(root / "secret-link")}),
        client.get("/v1/fs/file", params={"path": str(root / "escape" / "secret.txt")}),
        client.get("/v1/fs/stat", params={"path": target}),
        client.get("/v1/fs/entries", params={"path": str(root / "escape")}),
        client.get("/v1/fs/entries", params={"path": str(fenced.root / "..")}),
        put(client, str(root / "escape" / "new.txt"), b"x"),
        put(client, str(root / "secret-link"), b"overwritten"),
        client.post("/v1/fs/mkdir", params={"path": str(outside / "d")}),
        client.delete("/v1/fs/entry", params={"path": target}),
        client.post("/v1/fs/move", json={"from": target, "to": str(root / "stolen.txt")}),
        client.post("/v1/fs/move", json={"from": str(root / "x"), "to": str(outside / "x")}),
        tar_upload(client, make_tar([("a.txt", b"a")]), path=str(outside / "up")),
        client.get("/v1/fs/stat", params={"path": "."}),  # $HOME is outside the root
    ]
    for response in attempts:
        body = problem(response, 403)
        assert body["type"] == "urn:sandbox-agent:error:permission_denied"
        assert body["detail"] == "permission denied"
        assert "outside the allowed filesystem roots" in body["details"]["message"]  # type: ignore[index]
    assert listing(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"

    # inside the root everything works, and a link that leads out can still be removed
    assert put(client, str(root / "in" / "ok.txt"), b"ok").status_code == 200
    assert client.get("/v1/fs/entries", params={"path": str(root)}).status_code == 200
    assert tar_upload(client, make_tar([("t.txt", b"t")]), path=str(root / "in")).status_code == 200
    assert client.delete("/v1/fs/entry", params={"path": str(root / "escape")}).status_code == 200
    assert (outside / "secret.txt").exists()


def test_without_confinement_any_absolute_path_works(client: httpx.Client, tmp_path: Path) -> None:
    elsewhere = tmp_path / "anywhere" / "f.txt"
    assert put(client, str(elsewhere), b"free").status_code == 200
    assert client.get("/v1/fs/file", params={"path": str(elsewhere)}).content == b"free"


def sparse_tar(name: str, realsize: int) -> bytes:
    """A PAX (GNU sparse 1.0) member carrying one byte but declaring ``realsize``."""
    import io
    import tarfile

    body = b"1\n0\n1\n"
    body += b"\0" * (-len(body) % 512) + b"x"
    info = tarfile.TarInfo(f"GNUSparseFile.0/{name}")
    info.size = len(body)
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": name,
        "GNU.sparse.realsize": str(realsize),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def test_sparse_member_declaring_50_gib_is_refused(client: httpx.Client, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    data = sparse_tar("big", 50 * 1024**3)
    response = tar_upload(client, data, path=str(dest))
    assert "unpacks to more than" in str(detail(response, 400))
    assert listing(tmp_path) == []


def test_unpacked_total_is_capped(tmp_path: Path) -> None:
    from tests.support import start_bridge

    server = start_bridge(tmp_path, env={"ACP_BRIDGE_UPLOAD_UNPACKED_LIMIT": "1000"})
    try:
        client = server.client()
        dest = tmp_path / "dest"
        over = make_tar([("a.bin", b"a" * 600), ("b.bin", b"b" * 600)])
        assert "unpacks to more than 1000 bytes" in str(detail(tar_upload(client, over, path=str(dest)), 400))
        assert not dest.exists()
        under = make_tar([("a.bin", b"a" * 600), ("b.bin", b"b" * 400)])
        assert tar_upload(client, under, path=str(dest)).status_code == 200
        assert sorted(os.listdir(dest)) == ["a.bin", "b.bin"]
    finally:
        server.stop()


def test_a_symlink_swapped_in_during_requests_never_leads_out(fenced: Fenced) -> None:
    """A local process flips a directory inside the root with a link to outside while the client
    reads, writes and lists through it: no answer ever shows or changes the outside."""
    import shutil
    import threading
    import uuid

    client = fenced.bridge.client()
    name = f"flip-{uuid.uuid4().hex[:6]}"
    inside, link, outside = fenced.root / name, fenced.root / (name + ".link"), fenced.outside / name
    inside.mkdir()
    outside.mkdir()
    (inside / "f.txt").write_text("inside")
    (outside / "f.txt").write_text("secret")
    link.symlink_to(outside)
    flip = fenced.root / (name + ".flip")
    stop = threading.Event()

    flips = 0

    def flipper() -> None:
        # `flip` is alternately the real directory and the link out (atomic renames). A write may
        # create `flip` as a new directory while it is absent: that one is removed again.
        nonlocal flips
        while not stop.is_set():
            try:
                os.rename(inside, flip)
                os.rename(flip, inside)
                os.rename(link, flip)
                os.rename(flip, link)
                flips += 1
            except OSError:
                if flip.is_dir() and not flip.is_symlink():
                    shutil.rmtree(flip, ignore_errors=True)

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    seen = set()
    try:
        for i in range(150):
            read = client.get("/v1/fs/file", params={"path": str(flip / "f.txt")})
            seen.add(read.status_code)
            assert b"secret" not in read.content
            client.put("/v1/fs/file", params={"path": str(flip / "f.txt")}, content=f"w{i}".encode())
            listed = client.get("/v1/fs/entries", params={"path": str(flip)})
            assert "secret" not in listed.text
    finally:
        stop.set()
        thread.join(5)
    assert (outside / "f.txt").read_text() == "secret"
    assert sorted(os.listdir(outside)) == ["f.txt"]
    assert seen <= {200, 400, 403, 502}
    assert flips > 10
