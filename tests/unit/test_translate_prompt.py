"""Legacy message + attachments -> ACP session/prompt blocks and the user item's parts."""

from __future__ import annotations

from app.translate.prompt import Attachment, attachment, prompt_blocks, user_item_parts


def test_attachments_become_prompt_blocks_and_user_parts() -> None:
    attachments = [
        Attachment(path="/w/shot.png", mime="image/png"),
        Attachment(path="/w/notes file.md", filename="notes.md"),
        Attachment(path="/w/data.bin", mime="application/octet-stream"),
    ]
    blocks = prompt_blocks("look", attachments, image_capable=True, image_data={"/w/shot.png": b"\x89PNG"})
    assert blocks[0] == {"type": "text", "text": "look"}
    assert blocks[1] == {"type": "image", "data": "iVBORw==", "mimeType": "image/png", "uri": "file:///w/shot.png"}
    assert blocks[2] == {
        "type": "resource_link",
        "uri": "file:///w/notes%20file.md",
        "name": "notes.md",
        "title": "notes.md",
        "mimeType": "text/markdown",
    }
    assert blocks[3]["type"] == "resource_link" and blocks[3]["mimeType"] == "application/octet-stream"
    # An agent without image support gets a link to the image instead.
    assert prompt_blocks("x", attachments[:1], image_capable=False, image_data={})[1]["type"] == "resource_link"
    assert user_item_parts(attachments) == [
        {"type": "image", "path": "/w/shot.png", "mime": "image/png"},
        {"type": "file_ref", "path": "/w/notes file.md", "action": "read", "diff": None},
        {"type": "file_ref", "path": "/w/data.bin", "action": "read", "diff": None},
    ]


def test_attachment_paths_are_shown_as_given() -> None:
    """Legacy kept an attachment's path as the client gave it; the agent still gets an absolute
    file URI (the bridge reads, and fences, that path), with the given one in `_meta`."""
    relative = attachment("docs/a b.md", "/srv/work")
    assert relative.path == "/srv/work/docs/a b.md" and relative.shown == "docs/a b.md"
    url = attachment("file:///tmp/x%20y.txt", "/srv/work")
    assert url.path == "/tmp/x y.txt" and url.shown == "file:///tmp/x%20y.txt"
    plain = attachment("/tmp/z.png", "/srv/work", "image/png")
    assert plain.given is None and plain.shown == "/tmp/z.png"
    blocks = prompt_blocks("look", [relative, plain], image_capable=False, image_data={})
    assert blocks[1]["uri"] == "file:///srv/work/docs/a%20b.md"
    assert blocks[1]["_meta"] == {"sandbox-agent/path": "docs/a b.md"}
    assert "_meta" not in blocks[2]
    assert [p["path"] for p in user_item_parts([relative, url, plain])] == [
        "docs/a b.md",
        "file:///tmp/x%20y.txt",
        "/tmp/z.png",
    ]
