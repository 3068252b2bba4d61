"""Message attachments the bridge reads itself (images sent inline to an image-capable agent): through
the same confined, regular-files-only, size-capped reader as ``/v1/fs``, off the event loop."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.errors import InvalidRequest
from app.fs import ops
from app.fs.paths import confinement
from app.translate.prompt import Attachment

if TYPE_CHECKING:
    from .session import Session


async def read_images(session: Session, attachments: list[Attachment]) -> dict[str, bytes]:
    """The bytes of each image attachment, by path, when the agent takes images. Every attachment
    must lie inside the fs roots (403 naming it otherwise); an image that is not a regular file or
    is over ``attachment_limit`` is a 400 naming it; a missing one is left out (sent as a link)."""
    settings = session.settings
    fence = confinement(tuple(settings.fs_roots))
    for attachment in attachments:
        if "\x00" in attachment.path:
            raise InvalidRequest(f"invalid path: contains a NUL byte: {attachment.path!r}")
        fence.check(attachment.path)
    if not session.agent.prompt_capabilities.get("image"):
        return {}
    limit = settings.attachment_limit
    data: dict[str, bytes] = {}
    for attachment in attachments:
        mime = attachment.mime_type
        if not (mime and mime.startswith("image/")) or attachment.path in data:
            continue
        try:
            data[attachment.path] = await asyncio.to_thread(ops.read_regular, fence, attachment.path, limit)
        except InvalidRequest as exc:
            if exc.message.startswith("path not found"):
                continue  # as before: the agent gets a link to it
            raise
    return data
