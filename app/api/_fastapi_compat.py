"""FastAPI checks every model it is given for a pydantic v1 model by importing ``pydantic.v1``
(~0.1 s of start-up, for nothing: the bridge has no v1 model). No class or object can be a v1 model
unless ``pydantic.v1`` has been imported, so the checks below ask only when it has been, with the
same answer FastAPI's own would give."""

from __future__ import annotations

import sys
from typing import Any


def _v1_base() -> type | None:
    v1 = sys.modules.get("pydantic.v1")
    return None if v1 is None else v1.BaseModel  # type: ignore[no-any-return]


def is_pydantic_v1_model_class(cls: Any) -> bool:
    base = _v1_base()
    return base is not None and isinstance(cls, type) and issubclass(cls, base)


def is_pydantic_v1_model_instance(obj: Any) -> bool:
    base = _v1_base()
    return base is not None and isinstance(obj, base)


def install() -> None:
    """Replace FastAPI's checks where FastAPI looks them up (only where they exist)."""
    try:
        from fastapi import encoders
        from fastapi._compat import shared
    except ImportError:  # another FastAPI layout: leave it as it is
        return
    import fastapi._compat as compat

    for module in (shared, compat, encoders):
        for name, check in (
            ("is_pydantic_v1_model_class", is_pydantic_v1_model_class),
            ("is_pydantic_v1_model_instance", is_pydantic_v1_model_instance),
        ):
            if hasattr(module, name):
                setattr(module, name, check)
