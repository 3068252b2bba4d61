"""ACP diff tool-call content -> legacy ``file_ref`` parts.

ACP v1: ``{type:"diff", path, oldText?, newText}``. No (or empty) oldText is a new file (action
``write``), anything else an edit (``patch``). The ``diff`` is a git-style unified diff
(``--- a/<path>``, ``+++ b/<path>``, 3 lines of context; ``--- /dev/null`` for a file that did not
exist) computed with :mod:`difflib`; identical texts give an empty diff. A diff must apply (``git
apply``, ``patch``) to the file as it was before the change, so it is made from whole files, found
(:func:`whole_files`) from the best the bridge knows, in this order:

1. the agent's exact record of the change (:func:`vendor_change`: claude's
   ``_meta.claudeCode.toolResponse`` has the file before the edit and the hunks it applied);
2. the file itself, read by the session layer and passed in (:func:`located`): an agent's
   ``oldText``/``newText`` may be snippets (claude sends the edited strings, trimmed), so the
   changed text is found in the file (once, or the diff is left out) and the rest of the file
   around it is the same before and after;
3. without the file, the texts themselves, for agents whose v1 diffs are whole files (ACP's
   meaning; the profile says so).

Anything else gives no diff (``null``) rather than one that would not apply.

ACP v2 draft: ``{type:"diff", changes:[{operation, path, oldPath?, fileType?, mimeType?}],
patch?:{format:"git_patch", text}}`` (``diff`` was the key's earlier name). One ``file_ref`` per
change (``add`` -> write; modify/delete/move/copy and unknown operations -> patch; the path is the
new path), whose diff is that file's section of the patch when the patch can be split, else null;
plus one ``json`` part with the structured changes, kept as sent.

Every diff is capped at :data:`DIFF_CAP` bytes (UTF-8); a longer one is cut at a line boundary and
ends with a ``[diff truncated at N bytes]`` line, N being the bytes kept.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

DIFF_CAP = 2 * 1024 * 1024
# Above this many lines difflib's matching takes over 0.1 s on the event loop; such inputs get a
# single whole-file hunk instead (still a valid unified diff, just not minimal).
MATCH_LINE_LIMIT = 20_000
NO_NEWLINE = "\\ No newline at end of file\n"

V2_ACTIONS = {"add": "write", "modify": "patch", "delete": "patch", "move": "patch", "copy": "patch"}


def is_v2(item: dict[str, Any]) -> bool:
    return isinstance(item.get("changes"), list)


# ---- v1 ----------------------------------------------------------------------------------------
def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n``; only ``\\n`` ends a line (as in git, unlike str.splitlines)."""
    if not text:
        return []
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def _label(path: str) -> str:
    # git drops the leading slash of absolute paths (a/home/... rather than a//home/...).
    return path.lstrip("/") or path


def _whole_file_hunk(old: list[str], new: list[str]) -> Iterable[str]:
    def span(lines: list[str]) -> str:
        return f"{1 if lines else 0},{len(lines)}"

    yield f"@@ -{span(old)} +{span(new)} @@\n"
    for line in old:
        yield "-" + line
    for line in new:
        yield "+" + line


def capped(lines: Iterable[str], cap: int = DIFF_CAP, *, mark_missing_newline: bool = True) -> str:
    """Join diff lines, cutting at a line boundary once ``cap`` bytes would be exceeded.

    A content line without its newline (the last line of a text that has none) gets git's
    ``\\ No newline at end of file`` marker.
    """
    out: list[str] = []
    size = 0
    for line in lines:
        if mark_missing_newline and not line.endswith("\n"):
            line = line + "\n" + NO_NEWLINE
        length = len(line) if line.isascii() else len(line.encode("utf-8"))
        if size + length > cap:
            out.append(f"[diff truncated at {size} bytes]\n")
            break
        out.append(line)
        size += length
    return "".join(out)


def unified_diff(path: str, old: str, new: str, *, cap: int = DIFF_CAP, context: int = 3, created: bool = False) -> str:
    """Git-style unified diff of two texts; "" when they are identical. ``created``: the file did not
    exist before (``--- /dev/null``, as git writes it, so that ``git apply`` creates it)."""
    if old == new:
        return ""
    old_lines, new_lines = split_lines(old), split_lines(new)
    label = _label(path)
    source = "/dev/null" if created else f"a/{label}"
    header = [f"--- {source}\n", f"+++ b/{label}\n"]
    if len(old_lines) + len(new_lines) > MATCH_LINE_LIMIT:
        return capped([*header, *_whole_file_hunk(old_lines, new_lines)], cap)
    return capped(difflib.unified_diff(old_lines, new_lines, source, f"b/{label}", n=context), cap)


def v1_texts(item: dict[str, Any]) -> tuple[str, str, str]:
    """(path, oldText, newText) of a v1 diff item, "" for what is missing."""
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    return (
        path if isinstance(path, str) else "",
        old if isinstance(old, str) else "",
        new if isinstance(new, str) else "",
    )


def v1_file_ref(item: dict[str, Any], *, cap: int = DIFF_CAP) -> dict[str, Any]:
    """The file_ref of a v1 diff whose texts are the whole file before and after."""
    path, old, new = v1_texts(item)
    return file_ref(path, None if not old else old, new, cap=cap)


def file_ref(path: str, before: str | None, after: str, *, cap: int = DIFF_CAP) -> dict[str, Any]:
    """The file_ref of a change from ``before`` (None: a new file) to ``after``, whole files."""
    created = before is None
    diff = unified_diff(path, before or "", after, cap=cap, created=created)
    return {"type": "file_ref", "path": path, "action": "write" if created else "patch", "diff": diff}


def no_diff_ref(path: str, old: str) -> dict[str, Any]:
    """The file_ref of a change the bridge cannot show exactly: the file, no diff."""
    return {"type": "file_ref", "path": path, "action": "patch" if old else "write", "diff": None}


# ---- whole files ---------------------------------------------------------------------------------
WholeFiles = tuple[str | None, str]  # the file before (None: it did not exist) and after the change


def located(old: str, new: str, view: str | None, changed: bool) -> WholeFiles | None:
    """The whole file before and after a change of ``old`` to ``new`` (snippets or whole files),
    found in ``view``, the file as read (None: there is no such file): after the change when
    ``changed``, else before it (a change not made, or not yet). The text looked for must be in
    the file exactly once (else None): around it, the file is the same before and after, newlines
    included. An empty ``old`` in a file that is created after the change means it did not exist."""
    if view is None:
        return (None, new) if not changed and not old else None
    found, put = (new, old) if changed else (old, new)
    if found:
        at = view.find(found)
        if at < 0 or view.find(found, at + 1) >= 0:
            return None  # not there (changed since), or ambiguous
        other = view[:at] + put + view[at + len(found) :]
    elif view:
        return None  # nothing to look for in a file that has text
    else:
        other = put
    before, after = (other, view) if changed else (view, other)
    if changed and not old and not before:
        return None, after  # created (ACP: no oldText for a new file)
    return before, after


def apply_hunks(original: str, hunks: Any) -> str | None:
    """The file after jsdiff's ``structuredPatch`` hunks (``{oldStart, oldLines, lines: [" ctx",
    "-old", "+new", "\\ No newline at end of file"]}``) applied to ``original``; None when they do
    not fit it exactly."""
    if not isinstance(hunks, list):
        return None
    lines = split_lines(original)
    out: list[str] = []
    position = 0
    for hunk in hunks:
        if (
            not isinstance(hunk, dict)
            or type(hunk.get("oldStart")) is not int
            or not isinstance(hunk.get("lines"), list)
        ):
            return None
        old_side: list[list[Any]] = []  # [text, ends with a newline]
        new_side: list[list[Any]] = []
        last: str | None = None
        for line in hunk["lines"]:
            if not isinstance(line, str) or not line:
                return None
            tag, text = line[0], line[1:]
            if tag == "\\":
                if last in (" ", "-") and old_side:
                    old_side[-1][1] = False
                if last in (" ", "+") and new_side:
                    new_side[-1][1] = False
                continue
            if tag not in " -+":
                return None
            if tag in " -":
                old_side.append([text, True])
            if tag in " +":
                new_side.append([text, True])
            last = tag
        start = max(hunk["oldStart"] - 1, 0) if old_side else max(hunk["oldStart"], 0)
        expected = [text + ("\n" if newline else "") for text, newline in old_side]
        if start < position or lines[start : start + len(expected)] != expected:
            return None
        out.extend(lines[position:start])
        out.extend(text + ("\n" if newline else "") for text, newline in new_side)
        position = start + len(expected)
    out.extend(lines[position:])
    return "".join(out)


def vendor_change(meta: Any) -> tuple[str, WholeFiles] | None:
    """An agent's own record of a file change, as (path, whole files): a ``toolResponse`` in a
    vendor's ``_meta`` (claude's ``_meta.claudeCode``) with ``filePath``, ``originalFile`` (null for
    a new file) and ``structuredPatch`` (its hunks) or ``content`` (the whole file written). None
    when there is none, or when its parts do not agree."""
    if not isinstance(meta, dict):
        return None
    for key, value in meta.items():
        if key.startswith("sandbox-agent/") or not isinstance(value, dict):
            continue
        response = value.get("toolResponse")
        if not isinstance(response, dict) or "originalFile" not in response:
            continue
        path, original = response.get("filePath"), response.get("originalFile")
        if not isinstance(path, str) or not path or not (original is None or isinstance(original, str)):
            continue
        hunks = response.get("structuredPatch")
        patched = apply_hunks(original or "", hunks) if hunks else None
        content = response.get("content")
        if isinstance(content, str):  # a whole file written (claude's Write)
            if patched is None or patched == content:
                return path, (original, content)
        elif patched is not None and original is not None:
            return path, (original, patched)
    return None


def output_change(raw_output: Any) -> tuple[str, WholeFiles] | None:
    """An agent's own record of a file change in a tool's ``rawOutput`` (qwen-code's writes and
    edits): ``filePath``, ``originalContent`` ("" or null for a new file) and ``newContent``."""
    if not isinstance(raw_output, dict):
        return None
    path, before, after = raw_output.get("filePath"), raw_output.get("originalContent"), raw_output.get("newContent")
    if not isinstance(path, str) or not path or not isinstance(after, str):
        return None
    if before is not None and not isinstance(before, str):
        return None
    return path, (before or None, after)


# ---- v2 ----------------------------------------------------------------------------------------
def patch_text(item: dict[str, Any]) -> str | None:
    patch = item.get("patch")
    if isinstance(patch, str):
        return patch or None
    if not isinstance(patch, dict):
        return None
    for key in ("text", "diff"):  # "diff" is the draft's earlier name for the key
        text = patch.get(key)
        if isinstance(text, str) and text:
            return text
    return None


def _strip_prefix(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def _header_path(value: str) -> str | None:
    value = value.split("\t", 1)[0].rstrip("\r")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not value or value == "/dev/null":
        return None
    return value


def _git_header_paths(rest: str) -> list[str]:
    """Both paths of ``diff --git <a> <b>``; paths may hold spaces, so look for a split with equal halves."""
    rest = rest.rstrip("\r\n")
    for index, char in enumerate(rest):
        if char == " " and _strip_prefix(rest[:index]) == _strip_prefix(rest[index + 1 :]):
            return [rest[:index], rest[index + 1 :]]
    return rest.split(" ", 1)


def split_patch(text: str) -> list[tuple[set[str], str]]:
    """A multi-file patch as (paths named in the section's headers, section text) pairs."""
    lines = split_lines(text)
    starts: list[int]
    if any(line.startswith("diff --git ") for line in lines):
        starts = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
    else:
        starts = [i for i, line in enumerate(lines[:-1]) if line.startswith("--- ") and lines[i + 1].startswith("+++ ")]
    sections: list[tuple[set[str], str]] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        section = lines[start:end]
        paths: set[str] = set()
        for line in section:
            if line.startswith("diff --git "):
                candidates = _git_header_paths(line[len("diff --git ") :])
            elif line.startswith(("--- ", "+++ ")):
                candidates = [line[4:]]
            elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
                candidates = [line.split(" ", 2)[2]]
            elif line.startswith("@@"):
                break
            else:
                continue
            for candidate in candidates:
                path = _header_path(candidate.rstrip("\n"))
                if path is not None:
                    paths.add(path)
                    paths.add(_strip_prefix(path))
        sections.append(({p.lstrip("/") for p in paths}, "".join(section)))
    return sections


def _section_for(change: dict[str, Any], sections: list[tuple[set[str], str]], only: bool) -> str | None:
    names = {v.lstrip("/") for v in (change.get("path"), change.get("oldPath")) if isinstance(v, str) and v}
    for paths, section in sections:
        if names & paths:
            return section
    if only and len(sections) == 1:
        return sections[0][1]  # one change, one section: they belong together
    return None


def v2_parts(item: dict[str, Any], *, cap: int = DIFF_CAP) -> list[dict[str, Any]]:
    changes = item["changes"]
    text = patch_text(item)
    sections = split_patch(text) if text else []
    valid = [c for c in changes if isinstance(c, dict)]
    parts: list[dict[str, Any]] = []
    for change in valid:
        path = change.get("path")
        if not isinstance(path, str) or not path:
            old_path = change.get("oldPath")
            path = old_path if isinstance(old_path, str) else ""
        action = V2_ACTIONS.get(change.get("operation"), "patch")  # type: ignore[arg-type]
        section = _section_for(change, sections, len(valid) == 1) if sections else None
        diff = capped(split_lines(section), cap, mark_missing_newline=False) if section is not None else None
        parts.append({"type": "file_ref", "path": path, "action": action, "diff": diff})
    parts.append({"type": "json", "json": {"changes": changes}})
    return parts


def patch_for(path: str, text: str, *, cap: int = DIFF_CAP) -> str | None:
    """The hunks for ``path`` in a unified diff the agent made itself (e.g. opencode's
    ``rawOutput.metadata.diff``), under git-style headers; None when it does not show the file."""
    sections = split_patch(text)
    name = path.lstrip("/")
    section = next((body for paths, body in sections if name in paths), None)
    if section is None:
        return None
    lines = split_lines(section)
    first = next((i for i, line in enumerate(lines) if line.startswith("@@")), None)
    if first is None:
        return None
    label = _label(path)
    return capped([f"--- a/{label}\n", f"+++ b/{label}\n", *lines[first:]], cap, mark_missing_newline=False)


def file_refs(item: dict[str, Any], *, cap: int = DIFF_CAP) -> list[dict[str, Any]]:
    """The legacy parts of one ACP diff content item, v1 or v2."""
    if is_v2(item):
        return v2_parts(item, cap=cap)
    return [v1_file_ref(item, cap=cap)]
