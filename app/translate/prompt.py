"""Legacy message + attachments -> ACP ``session/prompt`` content blocks, and the user item parts."""

from __future__ import annotations

import base64
import mimetypes
import os
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, unquote

PATH_META = "sandbox-agent/path"


@dataclass(slots=True)
class Attachment:
    path: str  # absolute: what the bridge reads and the agent's file URI
    mime: str | None = None
    filename: str | None = None
    given: str | None = None  # the path as the client sent it, when that differs

    @property
    def mime_type(self) -> str | None:
        return self.mime or mimetypes.guess_type(self.path)[0]

    @property
    def shown(self) -> str:
        """The path legacy showed: as given (behavior §3.8 lists it unchanged)."""
        return self.given if self.given is not None else self.path

    def meta(self) -> dict[str, Any]:
        """``_meta`` of its block: the given path, when the URI had to be made from another."""
        return {"_meta": {PATH_META: self.given}} if self.given is not None else {}


def file_uri(path: str) -> str:
    return "file://" + quote(path)


def prompt_blocks(
    message: str,
    attachments: list[Attachment],
    *,
    image_capable: bool,
    image_data: dict[str, bytes],
) -> list[dict[str, Any]]:
    """Text first, then one block per attachment: an ``image`` block when the agent takes images and
    the file could be read, otherwise a ``resource_link``."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message}]
    for attachment in attachments:
        mime = attachment.mime_type
        data = image_data.get(attachment.path)
        if image_capable and mime and mime.startswith("image/") and data is not None:
            blocks.append(
                {
                    "type": "image",
                    "data": base64.b64encode(data).decode("ascii"),
                    "mimeType": mime,
                    "uri": file_uri(attachment.path),
                    **attachment.meta(),
                }
            )
            continue
        link: dict[str, Any] = {
            "type": "resource_link",
            "uri": file_uri(attachment.path),
            "name": attachment.filename or PurePosixPath(attachment.path).name or attachment.path,
        }
        if attachment.filename:
            link["title"] = attachment.filename
        if mime:
            link["mimeType"] = mime
        link.update(attachment.meta())
        blocks.append(link)
    return blocks


def attachments_text(message: str, paths: list[str]) -> str:
    """The message with its attachments listed as the legacy server put them in the prompt text
    (behavior §3.8), which is what the legacy mock saw."""
    if not paths:
        return message
    return message + "\n\nAttachments:\n" + "".join(f"- {path}\n" for path in paths)


def user_item_parts(attachments: list[Attachment]) -> list[dict[str, Any]]:
    """The attachments as parts of the user's message item."""
    parts: list[dict[str, Any]] = []
    for attachment in attachments:
        mime = attachment.mime_type
        if mime and mime.startswith("image/"):
            parts.append({"type": "image", "path": attachment.shown, "mime": mime})
        else:
            parts.append({"type": "file_ref", "path": attachment.shown, "action": "read", "diff": None})
    return parts


def attachment(path: str, root: str, mime: str | None = None, filename: str | None = None) -> Attachment:
    """An attachment as legacy kept it: its path shown as given (a relative one, a ``file://`` URL),
    while the bridge reads, and the agent is sent, the absolute path it means (relative ones from
    ``root``; ACP file URIs are absolute)."""
    local = unquote(path.removeprefix("file://")) if path.startswith("file://") else path
    absolute = local if os.path.isabs(local) else os.path.normpath(os.path.join(root, local))
    return Attachment(absolute, mime, filename, given=None if absolute == path else path)
