"""The private data dir of a server started without one: made at start, removed at exit."""

from __future__ import annotations

import atexit
import shutil

from app.settings import Settings


def prepare(settings: Settings) -> None:
    """Create the server's private data dir (owner-only); nothing to do for a configured one."""
    if not settings.private_data_dir:
        return
    path = settings.resolved_data_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Also on an exit that skips the server's shutdown (an error while starting).
    atexit.register(remove, settings)


def remove(settings: Settings) -> None:
    if settings.private_data_dir:
        shutil.rmtree(settings.resolved_data_dir(), ignore_errors=True)
