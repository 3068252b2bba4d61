"""Per-session wire transcripts: every JSON-RPC message between the bridge and an agent, both ways.

One JSON object per line::

    {"t": 0.412, "dir": "agent->client", "msg": {...}}

``t`` is seconds since the transcript was opened (the session's start), ``dir`` is
``client->agent`` or ``agent->client``. Messages are serialised at the moment they cross the wire
(later mutation by a handler cannot change them), then handed to one background writer thread
shared by all sessions, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

logger = logging.getLogger(__name__)

CLIENT_TO_AGENT = "client->agent"
AGENT_TO_CLIENT = "agent->client"

# Longest file name stem kept before a hash stands in for the rest (names are limited to 255 bytes).
_STEM_LIMIT = 150


def safe_file_stem(session_id: str) -> str:
    """A file name stem for any session id: reversible percent-encoding, no leading dot, bounded."""
    stem = quote(session_id, safe="")  # '/' and '%' are encoded; letters, digits and "_.-~" stay
    if stem.startswith("."):  # no hidden files, no "." or ".."
        stem = "%2E" + stem[1:]
    if not stem:
        stem = "_"
    if len(stem) > _STEM_LIMIT:
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
        stem = f"{stem[:_STEM_LIMIT]}-{digest}"
    return stem


class _Sink:
    """The background thread that owns every transcript file handle."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[IO[bytes], bytes | None, Future[None] | None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, handle: IO[bytes], data: bytes | None, done: Future[None] | None = None) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="acp-transcripts", daemon=True)
                    self._thread.start()
        self._queue.put((handle, data, done))

    def _run(self) -> None:
        while True:
            handle, data, done = self._queue.get()
            try:
                if data is not None:
                    handle.write(data)
                    if self._queue.empty():  # a burst is over: make it readable on disk
                        handle.flush()
                else:  # close request
                    handle.flush()
                    handle.close()
            except (OSError, ValueError) as exc:
                logger.warning("transcript write failed: %s", exc)
            finally:
                if done is not None and not done.done():
                    done.set_result(None)


_SINK = _Sink()


class TranscriptWriter:
    """Writes one session's wire traffic. ``write`` never blocks; ``close`` flushes and is idempotent."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self._handle = handle
        self._start = time.monotonic()
        self._closed = False

    @classmethod
    def open(cls, directory: Path, session_id: str) -> TranscriptWriter | None:
        """A writer for ``<directory>/<safe session id>.jsonl`` (``.<n>.jsonl`` if taken), or None
        when the file cannot be created (the session goes on without a transcript)."""
        stem = safe_file_stem(session_id)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for n in range(1000):
                path = directory / (f"{stem}.jsonl" if n == 0 else f"{stem}.{n}.jsonl")
                try:
                    handle = open(path, "xb", buffering=64 * 1024)  # closed by the sink thread
                except FileExistsError:
                    continue
                return cls(path, handle)
        except OSError as exc:
            logger.warning("cannot write transcript for session %s in %s: %s", session_id, directory, exc)
            return None
        logger.warning("cannot write transcript for session %s: too many files named %s", session_id, stem)
        return None

    def write(self, direction: str, message: Any) -> None:
        if self._closed:
            return
        entry = {"t": round(time.monotonic() - self._start, 3), "dir": direction, "msg": message}
        try:
            line = json.dumps(entry, ensure_ascii=False, separators=(", ", ": "), default=repr)
        except ValueError:  # e.g. a circular structure: keep a trace rather than nothing
            line = json.dumps({**entry, "msg": repr(message)})
        _SINK.put(self._handle, (line + "\n").encode("utf-8"))

    def close(self) -> Future[None]:
        """Flush and close in the writer thread; the future completes once the file is closed."""
        done: Future[None] = Future()
        if self._closed:
            done.set_result(None)
            return done
        self._closed = True
        _SINK.put(self._handle, None, done)
        return done

    async def aclose(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.wrap_future(self.close()), timeout)
