"""The docs as a newcomer meets them: README a front page with the two set-up commands, every page of
docs/ in the site's nav, every code block of a known kind and well-formed (shell, Python, YAML, JSON,
TOML), a block not run saying why and how it is checked, and the tables made from the code (the
endpoints) equal to what the code makes. The blocks that run, run in test_code_blocks.py."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.docs import api_table
from tests.docs.blocks import LANGUAGES, Block, all_blocks, documents, included
from tests.support import ROOT

BLOCKS = all_blocks()
SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . && .venv/bin/acp-rest-bridge server",
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[test]' "
    "&& .venv/bin/python -m pytest -q",
)


def test_readme_is_a_front_page_with_the_two_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    lines = readme.splitlines()
    assert [line for line in lines if line.startswith("python3 -m venv")] == list(SETUP)
    # .ci/run takes the test command from the line after this anchor.
    anchor = lines.index("Run the whole test suite:")
    assert next(line for line in lines[anchor:] if line.startswith("python3 -m venv")) == SETUP[1]


def test_every_page_is_in_the_nav_and_every_link_of_readme_exists() -> None:
    pages = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    in_nav = {path.relative_to(ROOT / "docs").as_posix() for path in documents() if path.parent != ROOT}
    assert pages == in_nav
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_included_files_exist() -> None:
    for document in documents():
        for path in included(document):
            assert path.is_file(), f"{document.name} includes {path}, which is missing"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_each_block_is_well_formed(block: Block) -> None:
    assert block.language in LANGUAGES, f"{block.name}: fence language {block.language!r} (one of {sorted(LANGUAGES)})"
    assert block.comment is None, f"{block.name}: {block.comment!r} is not `<!-- check: KIND -- reason -->`"
    if block.kind == "tested-by":
        assert block.tested_by is not None and (ROOT / block.tested_by).is_file(), block.name
    if block.kind in ("syntax", "tested-by", "run"):
        if block.language == "sh":
            done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, f"{block.name}: {done.stderr}"
        elif block.language == "python":
            compile(block.code, block.name, "exec")
    if block.language == "yaml":
        assert list(yaml.safe_load_all(block.code)), block.name
    elif block.language == "json":
        json.loads(block.code)
    elif block.language == "toml":
        tomllib.loads(block.code)
    if block.kind == "run":
        assert block.expected(), f"{block.name}: a block that runs says what it prints (`# -> ` lines)"


def test_the_endpoint_table_is_the_served_documents() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert api_table.START in page and api_table.END in page
    table = page.split(api_table.START, 1)[1].split(api_table.END, 1)[0]
    stale = "docs/api.md's endpoint table is stale: paste `python -m tests.docs.api_table` in"
    assert table == api_table.render(), stale


def test_the_agents_file_example_is_one_the_server_loads(tmp_path: Path) -> None:
    from app.agents.registry import load_agents_file

    (block,) = [b for b in BLOCKS if b.language == "toml" and b.document.name == "agents.md"]
    path = tmp_path / "agents.toml"
    path.write_text(block.code)
    specs = load_agents_file(path)
    assert [spec.id for spec in specs] == ["probe"]
