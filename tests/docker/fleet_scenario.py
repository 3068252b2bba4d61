"""The fleet of ``docs/fleet/compose.yaml``, driven through its round-robin proxy only (run by
``tests/docker/fleet.sh`` once the compose project is up)::

    python -m tests.docker.fleet_scenario --url http://127.0.0.1:PORT --token TOKEN --project NAME

A session is created, a tar uploaded and files written and read with its ``session_id`` (whichever
bridge the proxy picks, they land in the workspace volume of the bridge that runs it), a message is
sent and its turn streamed over SSE; then the runner's container is stopped, and the session goes on
on the other bridge: a message, the same SSE stream resumed from where it was (no event lost or
repeated), files now in that bridge's workspace. Prints ``N passed, N failed``.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support import iter_sse

SESSION = "compose"
BRIDGE_META = "sandbox-agent/bridge"


class Failed(Exception):
    pass


def check(condition: object, what: str) -> None:
    if not condition:
        raise Failed(what)


def container(project: str, service: str) -> str:
    return f"{project}_{service}_1"  # docker-compose 1.x naming


def in_container(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", name, *argv], capture_output=True, text=True, timeout=60)


def wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise Failed(f"{what}: not within {timeout} s")


def events_until(
    client: httpx.Client, offset: int, stop: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The session's SSE stream through the proxy, from ``offset`` until ``stop`` holds."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    with client.stream("GET", f"/v1/sessions/{SESSION}/events/sse", params={"offset": offset}) as response:
        check(response.status_code == 200, f"SSE answered {response.status_code}")
        for event in iter_sse(response, deadline):
            seen.append(event)
            if stop(seen):
                return seen
    raise Failed(f"SSE ended without the awaited event: {[e['type'] for e in seen]}")


def turn_ended(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda seen: sum(1 for e in seen if e["type"] == "turn.ended") >= count


def runner(client: httpx.Client) -> str:
    listed = client.get("/v1/sessions").json()["sessions"]
    url: str = next(s for s in listed if s["sessionId"] == SESSION)["_meta"][BRIDGE_META]["url"]
    return url


def tar_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def run(url: str, token: str, project: str, passed: list[str]) -> None:
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    bridges = {f"http://{name}:2468": container(project, name) for name in ("bridge-a", "bridge-b")}
    wait(lambda: all(client.get("/v1/health").status_code == 200 for _ in range(4)), 120, "both bridges healthy")
    wait(lambda: client.get("/v1/sessions").status_code == 200, 30, "sessions listed")

    created = client.post(f"/v1/sessions/{SESSION}", json={"agent": "mock"})
    check(created.status_code == 200, f"create: {created.status_code} {created.text}")
    first = runner(client)
    check(first in bridges, f"runner {first}")
    other = next(u for u in bridges if u != first)
    passed.append(f"session created through the proxy, run by {first}")

    on = {"session_id": SESSION}
    upload = client.post(
        "/v1/fs/upload-batch",
        params={**on, "path": "uploaded"},
        content=tar_of({"one.txt": b"one", "dir/two.txt": b"two"}),
        headers={"content-type": "application/x-tar"},
    )
    check(upload.status_code == 200, f"upload-batch: {upload.status_code} {upload.text}")
    for _ in range(4):  # round robin: both bridges answer, from the runner's disk
        put = client.put("/v1/fs/file", params={**on, "path": "notes.txt"}, content=b"from the proxy")
        check(put.status_code == 200, f"PUT: {put.status_code} {put.text}")
        got = client.get("/v1/fs/file", params={**on, "path": "uploaded/dir/two.txt"})
        check(got.status_code == 200 and got.content == b"two", f"GET: {got.status_code} {got.text}")
        listed = client.get("/v1/fs/entries", params=on)
        check({"notes.txt", "uploaded"} <= {e["name"] for e in listed.json()}, f"entries: {listed.text}")
    check(in_container(bridges[first], "cat", "/workspace/notes.txt").stdout == "from the proxy", "not on the runner")
    check(in_container(bridges[other], "test", "-e", "/workspace/notes.txt").returncode != 0, "on the other bridge")
    passed.append("upload-batch, PUT, GET and entries with the session's id: the runner's workspace, whoever answered")

    sent = client.post(f"/v1/sessions/{SESSION}/messages", json={"message": "hello"})
    check(sent.status_code == 204, f"message: {sent.status_code} {sent.text}")
    before = events_until(client, 0, turn_ended(1))
    passed.append(f"a message and its turn over SSE through the proxy ({len(before)} events)")

    stopped = subprocess.run(["docker", "stop", "-t", "15", bridges[first]], capture_output=True, text=True, timeout=60)
    check(stopped.returncode == 0, f"docker stop: {stopped.stderr}")
    passed.append(f"the runner's container stopped ({bridges[first]})")

    def message_taken() -> bool:
        answer = client.post(f"/v1/sessions/{SESSION}/messages", json={"message": "still there?"})
        return answer.status_code == 204

    wait(message_taken, 60, "a message after the stop")
    after = events_until(client, before[-1]["sequence"], turn_ended(1))
    history = client.get(f"/v1/sessions/{SESSION}/events").json()["events"]
    check([e["sequence"] for e in history] == list(range(1, len(history) + 1)), "a gap or a repeat in the events")
    check(history[: len(before)] == before, "the events before the stop changed")
    check(history[len(before) : len(before) + len(after)] == after, "SSE resumed with a gap or a repeat")
    check(runner(client) == other, f"runner after the stop: {runner(client)}")
    passed.append(f"the session goes on on {other}: a message, SSE resumed without a gap or a repeat")

    put = client.put("/v1/fs/file", params={**on, "path": "after.txt"}, content=b"after the stop")
    check(put.status_code == 200, f"PUT after the stop: {put.status_code} {put.text}")
    check(client.get("/v1/fs/file", params={**on, "path": "after.txt"}).content == b"after the stop", "GET after")
    check(
        in_container(bridges[other], "cat", "/workspace/after.txt").stdout == "after the stop", "not on the new runner"
    )
    passed.append("files with the session's id: the new runner's workspace")
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--project", required=True)
    args = parser.parse_args()
    passed: list[str] = []
    try:
        run(args.url, args.token, args.project, passed)
    except (Failed, httpx.HTTPError, AssertionError, StopIteration) as exc:
        for line in passed:
            print(f"ok: {line}")
        print(f"FAILED: {exc!r}")
        print(f"{len(passed)} passed, 1 failed")
        sys.exit(1)
    for line in passed:
        print(f"ok: {line}")
    print(f"{len(passed)} passed, 0 failed")


if __name__ == "__main__":
    main()
