"""Further mock commands, registered into ``script.COMMANDS`` on import.

Each feature area adds its commands in its own module imported here.
"""

from __future__ import annotations

from . import bench  # noqa: F401
