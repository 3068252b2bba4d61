"""The inspector web page served at ``/ui/``: static HTML, CSS and JavaScript modules, no build step."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
