"""What is made from ``Settings``' fields (their descriptions and ``Option`` metadata), so that no
text about a setting is kept twice: the options table of docs/configuration.md (``acp-rest-bridge settings``
prints it; a test keeps the page equal), the flags of ``acp-rest-bridge server`` with their ``--help``, the settings
those flags give, and the one-line error for a bad value."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from app.settings import Settings, env_name, field_types, is_list, option


def default_text(field: FieldInfo) -> str:
    """The default as the table says it (Markdown)."""
    shown = option(field).default
    if shown is not None:
        return shown
    value = field.get_default(call_default_factory=True)
    if value is None or value == []:
        return "none"
    if value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        value = ",".join(str(item) for item in value)  # as the variable takes it
    return f"`{value}`"


def env_text(name: str, field: FieldInfo) -> str:
    text = f"`{env_name(name)}`"
    if is_list(field):
        separator = option(field).separator
        text += f" (JSON list or `{separator}`-separated)" if separator else " (JSON list or comma-separated)"
    return text


def render() -> str:
    """The table of server options (docs/configuration.md), one row per setting, in declaration order."""
    rows = ["| flag | env | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        shown = ", ".join(f"`{flag}`" for flag in option(field).flags)
        rows.append(f"| {shown} | {env_text(name, field)} | {default_text(field)} | {field.description or ''} |")
    return "\n".join(rows) + "\n"


def plain(text: str) -> str:
    """Markdown made terminal text (no backticks)."""
    return text.replace("`", "")


def flag_help(name: str, field: FieldInfo) -> str:
    """A flag's ``--help`` text: the description, its default and its variable, and where the
    docs say more (what the table's "(below)" points at: the text below it in docs/configuration.md);
    ``%`` escaped for argparse."""
    text = field.description or ""
    more = "(below" in text
    text = text.replace(" (below)", "").replace("(below; ", "(")
    tail = f"default {default_text(field)}; env {env_name(name)}" + ("; more in docs/configuration.md" if more else "")
    return plain(f"{text} ({tail})").replace("%", "%%")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``acp-rest-bridge server``, one per setting that has flags: a bool is a switch, a
    list repeats, an int or a path is converted by argparse. Every default is None, so a flag not
    given leaves the setting to its variable or default."""
    for name, field in Settings.model_fields.items():
        names = option(field).flags
        if not names:
            continue
        kwargs: dict[str, Any] = {"dest": name, "help": flag_help(name, field), "default": None}
        types = field_types(field)
        if bool in types:
            kwargs["action"] = "store_true"
        elif is_list(field):
            kwargs["action"] = "append"
        elif int in types:
            kwargs["type"] = int
        elif Path in types:
            kwargs["type"] = Path
        parser.add_argument(*names, **kwargs)


def from_args(args: argparse.Namespace) -> Settings:
    """The settings: the flags given, over the ``ACP_BRIDGE_*`` variables, over the defaults."""
    given = {}
    for name, field in Settings.model_fields.items():
        value = getattr(args, name, None) if option(field).flags else None
        if value is not None:
            given[name] = value
    return Settings(**given)


def error_line(exc: ValidationError) -> str:
    """One line for bad flag or ``ACP_BRIDGE_*`` values, naming each setting as it can be given."""
    parts = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else ""
        field = Settings.model_fields.get(name)
        names = [*(option(field).flags[-1:] if field is not None else ()), env_name(name)]
        where = ".".join(str(p) for p in error["loc"][1:])
        parts.append(" / ".join(names) + (f" [{where}]" if where else "") + f": {error['msg']}")
    return "invalid setting " + "; ".join(parts)
