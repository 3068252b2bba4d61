"""``serving.CoalescingTransport``: what one pass of the event loop writes goes out as one write;
a large part goes by reference, so a body many answers share is not copied per connection."""

from __future__ import annotations

import asyncio
from typing import Any

from app.serving import JOIN_LIMIT, CoalescingTransport


class Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[Any] = []

    def write(self, data: Any) -> None:
        self.writes.append(("write", data))

    def writelines(self, list_of_data: Any) -> None:
        self.writes.append(("writelines", list(list_of_data)))

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


async def test_small_writes_of_one_pass_are_joined_and_a_large_body_goes_by_reference() -> None:
    loop = asyncio.get_running_loop()
    below = Recording()
    transport = CoalescingTransport(below, loop)
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"{}")
    assert below.writes == [] and transport.get_write_buffer_size() == 21
    await asyncio.sleep(0)
    assert below.writes == [("write", b"HTTP/1.1 200 OK\r\n\r\n{}")]

    shared = b"x" * (JOIN_LIMIT + 1)  # e.g. the one rendering of /openapi.json
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(shared)
    transport.flush()
    kind, parts = below.writes[-1]
    assert kind == "writelines" and parts[1] is shared
    await asyncio.sleep(0)  # the pass's own flush finds nothing left
    assert len(below.writes) == 2

    # Many small parts (an SSE burst's frames) past the limit: joined, around a large one.
    frames = [b"data: %d\n\n" % i for i in range(3000)]
    for frame in frames[:1500]:
        transport.write(frame)
    transport.write(shared)
    for frame in frames[1500:]:
        transport.write(frame)
    transport.flush()
    kind, parts = below.writes[-1]
    assert kind == "writelines" and len(parts) == 3 and parts[1] is shared
    assert parts[0] + parts[2] == b"".join(frames)
    for frame in frames:  # only small ones, 34 KiB in all: one write
        transport.write(frame)
    transport.flush()
    assert below.writes[-1] == ("write", b"".join(frames))
