"""ACP ContentBlock <-> legacy ContentPart."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlparse

META_PREFIX = "sandbox-agent/"


def meta_get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj._meta["sandbox-agent/<key>"]`` when present; never required."""
    if not isinstance(obj, dict):
        return default
    meta = obj.get("_meta")
    if not isinstance(meta, dict):
        return default
    return meta.get(META_PREFIX + key, default)


def meta_str(obj: Any, key: str) -> str | None:
    """A ``sandbox-agent/<key>`` value that must be a non-empty string to count."""
    value = meta_get(obj, key)
    return value if isinstance(value, str) and value else None


def uri_to_path(uri: str) -> str:
    if uri.startswith("file://"):
        return unquote(urlparse(uri).path)
    return uri


def block_to_part(block: Any, *, reasoning: bool = False) -> dict[str, Any]:
    """One ContentBlock as one legacy ContentPart. Unknown blocks are kept as a json part."""
    if not isinstance(block, dict):
        return {"type": "json", "json": block}
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        # A text block marked with a reasoning visibility is reasoning wherever it comes (a whole
        # message can mix text and reasoning parts).
        if reasoning or meta_get(block, "reasoningVisibility") is not None:
            return {"type": "reasoning", "text": block["text"], "visibility": reasoning_visibility(block)}
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        path = block.get("uri")
        if not isinstance(path, str) or not path:
            path = meta_get(block, "path", "")
        return {"type": "image", "path": uri_to_path(path), "mime": block.get("mimeType")}
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return {"type": "file_ref", "path": uri_to_path(block["uri"]), "action": "read", "diff": None}
    if kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        text = resource.get("text")
        if isinstance(text, str):
            if resource.get("mimeType") == "application/json":
                try:
                    return {"type": "json", "json": json.loads(text)}
                except ValueError:
                    pass
            return {"type": "text", "text": text}
    return {"type": "json", "json": block}


def reasoning_visibility(block: Any, default: str = "public") -> str:
    visibility = meta_get(block, "reasoningVisibility", default)
    return visibility if visibility in ("public", "private") else default
