"""README's Python client section: its examples, which tests run and type-check as they are written."""

from __future__ import annotations

import re

from tests.support import ROOT


def readme_examples() -> list[str]:
    """The section's Python blocks, in order: the sync example first, then the async one."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python client") :]
    section = section[: section.index("\n## ", 1)]
    examples = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(examples) >= 2, "README's Python client section has a sync and an async example"
    return examples
