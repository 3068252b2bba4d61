"""The hidden temporary entries the bridge makes in users' directories (a PUT's file before it
replaces the target, an upload's staging directory), recorded so that the next server on the same
data dir removes those a crash left behind.

A temporary entry is named ``.<hint>.bridge-<16 hex digits>`` and made next to where it will land
(the final rename must stay on one filesystem). Before it is made, a record goes to
``<data dir>/temps/<token>``: the directory's device and inode, a path to find it again, and the
name; the record goes when the entry does. At start-up ``sweep`` removes, for every record left,
the entry of that name in the directory of that device and inode, and nothing else: a user's file
never has such a name, and a directory moved or replaced since is left alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

log = logging.getLogger("acp_rest_bridge.fs")

NAME = re.compile(r"\.[^/]*\.bridge-[0-9a-f]{16}")


def temp_name(hint: str) -> str:
    """A fresh hidden name for a temporary entry; ``hint`` (the target's name) keeps it readable."""
    return f".{hint[:32]}.bridge-{secrets.token_hex(8)}"


class TempBook:
    """Records of temporary entries under ``directory`` (None: nothing is recorded)."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory

    def add(self, dir_fd: int, name: str) -> str | None:
        """Record ``name`` in the open directory ``dir_fd`` before it is made; the record's token
        (None when there is no book, or it cannot be written: the entry is made all the same)."""
        if self.directory is None or not NAME.fullmatch(name):
            return None
        st = os.fstat(dir_fd)
        # A path to find the directory after a crash; what is removed is checked by device and inode.
        where = os.readlink(f"/proc/self/fd/{dir_fd}")
        record = json.dumps({"dir": where, "dev": st.st_dev, "ino": st.st_ino, "name": name})
        token = secrets.token_hex(8)
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd = os.open(
                os.path.join(self.directory, token), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600
            )
            try:
                os.write(fd, record.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("cannot record temporary file %s in %s: %s", name, self.directory, exc)
            return None
        return token

    def drop(self, token: str | None) -> None:
        """The entry is gone (renamed into place or removed): forget it."""
        if token is not None and self.directory is not None:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.directory, token))

    def sweep(self) -> int:
        """Remove the temporary entries an earlier run left; the number removed. Blocking."""
        if self.directory is None:
            return 0
        try:
            tokens = os.listdir(self.directory)
        except OSError:
            return 0
        removed = 0
        for token in tokens:
            record = os.path.join(self.directory, token)
            try:
                removed += _remove_recorded(Path(record).read_text())
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("cannot clean the temporary file recorded in %s: %s", record, exc)
            with contextlib.suppress(OSError):
                os.unlink(record)
        if removed:
            log.warning("removed %d temporary files left in users' directories by an earlier run", removed)
        return removed


def _remove_recorded(text: str) -> int:
    entry = json.loads(text)
    name = entry["name"]
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return 0
    try:
        dir_fd = os.open(entry["dir"], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        st = os.fstat(dir_fd)
        if (st.st_dev, st.st_ino) != (entry["dev"], entry["ino"]):
            return 0  # not the directory it was made in
        return remove_entry(dir_fd, name)
    finally:
        os.close(dir_fd)


def remove_entry(dir_fd: int, name: str) -> int:
    """Remove ``name`` in ``dir_fd`` (a directory with everything in it; a link, not its target):
    1 if something was removed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    return 1
