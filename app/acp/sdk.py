"""The bridge's one door to the official ACP SDK (``agent-client-protocol``).

The bridge uses the SDK's JSON-RPC layer: ``Connection``, the task helpers and ``RequestError``
(public modules only). The package's ``__init__`` also loads the whole typed schema (several hundred
pydantic models), which the bridge does not need: it translates the raw JSON itself. That schema
costs about 8 MB of resident memory and 0.6 s at every start. So, unless something has imported
``acp`` already, the package is registered without running its ``__init__``; the first use of a
top-level name (``acp.X``, ``from acp import X``) runs it then, so other code sees the full package.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any


def _register_lazily() -> None:
    if "acp" in sys.modules:
        return
    spec = importlib.util.find_spec("acp")
    if spec is None or spec.loader is None:
        return  # the imports below fail with the usual error
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> Any:  # PEP 562: runs only for names not set yet
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules["acp"] = package


_register_lazily()

from acp.connection import Connection  # noqa: E402
from acp.exceptions import RequestError  # noqa: E402
from acp.meta import PROTOCOL_VERSION  # noqa: E402
from acp.task import MessageSender, TaskSupervisor  # noqa: E402

SDK_DIR = os.path.dirname(sys.modules["acp"].__file__ or "")

__all__ = [
    "PROTOCOL_VERSION",
    "SDK_DIR",
    "Connection",
    "MessageSender",
    "RequestError",
    "TaskSupervisor",
]
