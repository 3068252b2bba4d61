"""The files an agent's diffs name, read for the translator (which does no I/O) so that the diffs it
shows apply to the file as it was: see ``app.translate.diffs`` (``located``).

A file is read when a tool call's result is shown and the agent gave no exact record of its change
(``SessionTranslator.files_wanted``): confined like ``/v1/fs`` and the agents' ``fs/*`` (the
server's ``--fs-root``s), a regular file of at most ``READ_LIMIT`` bytes, UTF-8, in a worker thread,
within ``READ_TIMEOUT`` seconds. A file that cannot be read so is left out: its diff is then shown
only when the agent's texts are whole files (else no diff)."""

from __future__ import annotations

import asyncio
import logging
import os

from app.errors import BridgeError
from app.fs import ops
from app.fs.paths import Confinement

log = logging.getLogger("acp_rest_bridge.sessions")

READ_LIMIT = 8 * 1024 * 1024
READ_TIMEOUT = 5.0


def read_files(paths: list[str], fence: Confinement) -> dict[str, str | None]:
    """Each file's text, None when it does not exist; unreadable ones left out. Blocking."""
    found: dict[str, str | None] = {}
    for path in paths:
        if not os.path.isabs(path) or "\x00" in path or not fence.allows(path):
            continue
        try:
            data = ops.read_regular(fence, path, READ_LIMIT)
        except BridgeError as exc:  # outside the roots, not a regular file, too large, not found
            if isinstance(exc.__cause__, FileNotFoundError):
                found[path] = None
            continue
        except OSError:
            continue
        try:
            found[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return found


async def files_for(paths: list[str], fence: Confinement, timeout: float = READ_TIMEOUT) -> dict[str, str | None]:
    """``read_files`` off the event loop, bounded in time (nothing read in time: nothing)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(read_files, paths, fence), timeout)
    except TimeoutError:
        log.warning("reading %s for its diff took over %ss: shown without it", ", ".join(paths), timeout)
        return {}
