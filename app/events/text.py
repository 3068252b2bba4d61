"""Text an agent sends may hold lone UTF-16 surrogates (a JSON ``\\ud83d`` escape without its pair,
e.g. an emoji cut in two by a JavaScript ``slice``). They cannot be encoded as UTF-8, so none of
them may reach an event, a page or the store: pairs are joined and any other surrogate becomes
U+FFFD (or, in raw JSON text, its ``\\uXXXX`` escape)."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _join_pairs(text: str) -> str:
    # UTF-16 round trip: a high + low pair becomes its one character, a lone one U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    return _join_pairs(text) if has_surrogate(text) else text


def escape_surrogates(text: str) -> str:
    """For JSON text: pairs joined, a lone surrogate written as its JSON escape (still valid JSON,
    since a surrogate can only stand inside a string)."""
    if not has_surrogate(text):
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


def is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def is_low_surrogate(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


def clean_value(value: object) -> object:
    """``value`` (parsed JSON) with every string cleaned; containers are copied only if needed."""
    if type(value) is str:
        return clean_text(value)
    if type(value) is dict:
        cleaned = {clean_text(k): clean_value(v) for k, v in value.items()}
        return (
            value
            if all(a is b for a, b in zip(cleaned.values(), value.values(), strict=True))
            and all(a is b for a, b in zip(cleaned, value, strict=True))
            else cleaned
        )
    if type(value) is list:
        items = [clean_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
