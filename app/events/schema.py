"""Versioned SQLite schemas (the event store's ``events.sqlite3``, the webhook outbox's
``webhooks.sqlite3``): the version is the database's ``PRAGMA user_version``, and a schema is the
list of its migrations, each moving it one version on. A database without a version was written
before versions existed: what its tables look like tells which version it is at.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence

from .store import StoreError

log = logging.getLogger("acp_rest_bridge.events")

# The statements that move a schema from the version before it to its own.
Migration = tuple[str, ...]


def user_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def migrate(
    conn: sqlite3.Connection,
    migrations: Sequence[Migration],
    unversioned: Callable[[sqlite3.Connection], int],
    where: str,
) -> int:
    """Bring the database to version ``len(migrations)``, each step in one transaction with its new
    version; the version it was at (0: new). ``unversioned`` tells the version of a database
    without one (0 when it has no tables). A database newer than ``migrations`` is refused
    (``StoreError``): this code would misread it."""
    current = len(migrations)
    stamped = user_version(conn)
    if stamped > current:
        raise StoreError(
            f"{where} has schema version {stamped}, newer than this acp-rest-bridge's ({current}):"
            " it was written by a newer release; run that one (or a newer one) on it"
        )
    found = stamped or unversioned(conn)
    for version in range(found + 1, current + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in migrations[version - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        if found:
            log.info("%s migrated to schema version %d", where, version)
    if stamped != current and found == current:
        conn.execute(f"PRAGMA user_version = {current}")  # the current shape, written before versions
    return found
