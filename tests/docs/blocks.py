"""The fenced code blocks of README.md, CONTRIBUTING.md and the docs site, and what is to be done with
each (CONTRIBUTING.md, "Code blocks in the docs"): a block runs, or the HTML comment on the line
before it says why not and how it is checked instead:

    <!-- check: syntax -- why -->              shell checked with bash -n, Python compiled
    <!-- check: tested-by <path> -- why -->    run by that test or script (which must exist)

``sh`` and ``python`` blocks run unless marked; ``yaml``, ``json`` and ``toml`` blocks are parsed;
``text`` blocks are output. A ``# -> `` line after a command is a line the block must print (``...``
stands for any text). Files a page includes whole (``--8<-- "path"``) are checked for syntax: their
examples are fragments, run by their own package's tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

LANGUAGES = {"sh", "python", "yaml", "json", "toml", "text"}
RUNNABLE = {"sh", "python"}
CHECK = re.compile(r"^<!-- check: (?P<kind>syntax|tested-by (?P<path>\S+)) -- (?P<reason>.+\S) -->$")
INCLUDE = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::[\w-]+)?"$')
EXPECTED = "# -> "
# The documents, in the order their shell blocks run (one server for all: session ids differ by page).
PAGES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    kind: str  # "run", "parse", "output", "syntax", "tested-by"
    tested_by: str | None = None
    reason: str | None = None
    comment: str | None = None  # a check comment that did not parse

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    def expected(self) -> list[str]:
        return [line.strip()[len(EXPECTED) :] for line in self.code.splitlines() if line.strip().startswith(EXPECTED)]


def documents() -> list[Path]:
    """README.md, CONTRIBUTING.md, CHANGELOG.md, then the docs site's pages in their nav order."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    return [ROOT / name for name in PAGES] + [ROOT / "docs" / page for page in nav_pages(nav)]


def nav_pages(nav: object) -> list[str]:
    """The pages of mkdocs.yml's nav, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def included(document: Path) -> list[Path]:
    """The files a page includes whole (pymdownx.snippets), from the repository's root."""
    lines = document.read_text(encoding="utf-8").splitlines()
    return [ROOT / m.group("path") for line in lines if (m := INCLUDE.match(line.strip()))]


def blocks(document: Path, *, include: bool = False) -> list[Block]:
    """The fenced blocks of a document. ``include``: a file some page includes (syntax only)."""
    lines = document.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("```"):
            index += 1
            continue
        language = line[3:].strip()
        end = index + 1
        while end < len(lines) and lines[end] != "```":
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        before = index - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        comment = lines[before].strip() if before >= 0 and lines[before].startswith("<!-- check") else None
        found.append(classify(document, index + 1, language, code, comment, include))
        index = end + 1
    return found


def classify(document: Path, line: int, language: str, code: str, comment: str | None, include: bool) -> Block:
    if comment is not None:
        match = CHECK.match(comment)
        if match is None:
            return Block(document, line, language, code, "syntax", comment=comment)
        kind = "tested-by" if match.group("path") else "syntax"
        return Block(document, line, language, code, kind, match.group("path"), match.group("reason"))
    if language == "text" or (include and language == ""):  # (diagrams of an included file)
        return Block(document, line, language or "text", code, "output")
    if language in RUNNABLE:
        if include:
            return Block(document, line, language, code, "syntax", reason="included whole by a page")
        return Block(document, line, language, code, "run")
    return Block(document, line, language, code, "parse")


def all_blocks() -> list[Block]:
    out: list[Block] = []
    seen: set[Path] = set()
    for document in documents():
        out.extend(blocks(document))
        for path in included(document):
            if path not in seen and path.resolve() not in {d.resolve() for d in documents()}:
                seen.add(path)
                out.extend(blocks(path, include=True))
    return out


def expected_pattern(expected: str) -> re.Pattern[str]:
    """A ``# -> `` line as a pattern over one printed line: ``...`` stands for any text."""
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")))
