"""The data dir, made at start when missing. The private one of a server started without one is
also removed at exit.

Its name carries the server's pid (``acp-rest-bridge-<pid>-<random>`` in the temp dir), so one left
by a server that was killed (SIGKILL, a crash) is recognised and removed by the next server that
starts.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
from pathlib import Path

from app.acp.orphans import ProcessRegistry
from app.fs.paths import TEMPS
from app.fs.temps import TempBook
from app.process_group import pid_exists
from app.settings import Settings

_PRIVATE = re.compile(r"acp-rest-bridge-(\d+)-[0-9a-f]+")


def prepare(settings: Settings) -> None:
    """Create the server's data dir (owner-only) when it does not exist: a configured one (and its
    parents), or the private one of this run."""
    path = settings.resolved_data_dir()
    if not settings.private_data_dir:
        # Every store keeps something there (agent processes, temporary-file records, the SQLite
        # events or webhook outbox), a fleet's bridge too, whose events are in its database.
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot create the data dir {path}: {exc.strerror}") from exc
        return
    if path.exists():
        return
    remove_stale(path.parent)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Also on an exit that skips the server's shutdown (an error while starting).
    atexit.register(remove, settings)


def remove(settings: Settings) -> None:
    if settings.private_data_dir:
        shutil.rmtree(settings.resolved_data_dir(), ignore_errors=True)


def remove_stale(parent: Path) -> None:
    """Private data dirs of this user whose server is gone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    uid = os.getuid()
    for entry in entries:
        match = _PRIVATE.fullmatch(entry.name)
        if match is None or pid_exists(int(match.group(1))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == uid:
                ProcessRegistry(Path(entry.path) / "processes").sweep()  # agents its server left running
                TempBook(os.path.join(entry.path, TEMPS)).sweep()  # and its temporary files
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue
