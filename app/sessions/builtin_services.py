"""Imports every module that registers a client service or notification handler."""

from __future__ import annotations

from . import files, terminals  # noqa: F401
