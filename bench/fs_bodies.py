"""Large /v1/fs bodies stream to disk: server peak memory and throughput for a big PUT, GET and upload.

Run: .venv/bin/python bench/fs_bodies.py [MiB]   (default 256)

Starts a bridge with a body limit above the payload, sends the body in 1 MiB chunks, and reports the
server's peak resident memory (VmHWM) before and after. Target: the peak grows by far less than the
payload (bodies are never held in memory whole).
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import start_bridge  # noqa: E402

MIB = 1024 * 1024


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def chunks(total_mib: int) -> Iterator[bytes]:
    block = bytes(range(256)) * 4096  # 1 MiB
    for _ in range(total_mib):
        yield block


def tar_stream(total_mib: int) -> Iterator[bytes]:
    """A tar with one big member, produced chunk by chunk."""
    info = tarfile.TarInfo("big.bin")
    info.size = total_mib * MIB
    yield info.tobuf(format=tarfile.USTAR_FORMAT)
    yield from chunks(total_mib)
    yield b"\0" * (tarfile.BLOCKSIZE * 2)


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        bridge = start_bridge(tmp_path, env={"ACP_BRIDGE_BODY_LIMIT": str((size + 8) * MIB)})
        try:
            client = bridge.client(timeout=600)
            pid = bridge.proc.pid
            base = peak_rss_mib(pid)
            print(f"server peak RSS at start: {base:.0f} MiB; payload {size} MiB")

            started = time.perf_counter()
            response = client.put("/v1/fs/file", params={"path": str(tmp_path / "big.bin")}, content=chunks(size))
            elapsed = time.perf_counter() - started
            assert response.status_code == 200, response.text
            print(f"PUT    {size / elapsed:7.0f} MiB/s  peak RSS {peak_rss_mib(pid):.0f} MiB")

            started = time.perf_counter()
            received = 0
            with client.stream("GET", "/v1/fs/file", params={"path": str(tmp_path / "big.bin")}) as stream:
                for part in stream.iter_bytes():
                    received += len(part)
            elapsed = time.perf_counter() - started
            assert received == size * MIB
            print(f"GET    {size / elapsed:7.0f} MiB/s  peak RSS {peak_rss_mib(pid):.0f} MiB")

            started = time.perf_counter()
            response = client.post(
                "/v1/fs/upload-batch",
                params={"path": str(tmp_path / "unpacked")},
                content=tar_stream(size),
                headers={"content-type": "application/x-tar"},
            )
            elapsed = time.perf_counter() - started
            assert response.status_code == 200, response.text
            print(f"upload {size / elapsed:7.0f} MiB/s  peak RSS {peak_rss_mib(pid):.0f} MiB")
            assert (tmp_path / "unpacked" / "big.bin").stat().st_size == size * MIB
        finally:
            bridge.stop()


if __name__ == "__main__":
    main()
