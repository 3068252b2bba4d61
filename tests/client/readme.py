"""The docs' Python client page: its examples, which tests run and type-check as they are written."""

from __future__ import annotations

import re

from tests.support import ROOT


def readme_examples() -> list[str]:
    """The page's own Python blocks (not those of the client's README it includes), in order: the
    sync example first, then the async one."""
    text = (ROOT / "docs" / "python-client.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(examples) >= 2, "docs/python-client.md has a sync and an async example"
    return examples
