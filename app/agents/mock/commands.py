"""Further mock commands, registered into ``script.COMMANDS`` on import.

Each feature area adds its commands in its own module imported here.
"""

from __future__ import annotations

from . import (
    bench,  # noqa: F401  (burst)
    files,  # noqa: F401
    hitl_script,  # noqa: F401
    memory,  # noqa: F401  (history)
    rich,  # noqa: F401  (tool, status, image, unknown, error, unparsed, end, demo, plan, diff, v2)
)
