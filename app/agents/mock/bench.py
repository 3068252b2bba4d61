"""Mock commands for benchmarks and stress tests.

- ``burst N [SIZE]``: one assistant message streamed as N chunks of SIZE characters, as fast as
  the pipe takes them.
"""

from __future__ import annotations

from .script import Context, Script, Step, chunk

BURST_DEFAULT = 10_000
BURST_SIZE = 32


def _burst(ctx: Context) -> list[Step]:
    words = ctx.words
    count = int(words[1]) if len(words) > 1 and words[1].isdigit() else BURST_DEFAULT
    size = int(words[2]) if len(words) > 2 and words[2].isdigit() else BURST_SIZE
    message_id = ctx.id("burst")
    return [chunk(message_id, f"{index:08d} ".ljust(size, "x")) for index in range(count)]


# This module's commands (by first word) and exact prompts (whole message), put together in commands.py.
COMMANDS: dict[str, Script] = {
    "burst": _burst,
}
