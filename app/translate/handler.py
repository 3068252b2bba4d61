"""What the item-making handlers (``status.py``, ``tools.py``) use of the session's
``SessionTranslator``, as a Protocol: they are typed without importing the module that imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .items import ItemIds, ItemLifecycle
    from .messages import MessageAssembler


class ItemTranslator(Protocol):
    @property
    def ids(self) -> ItemIds: ...
    @property
    def lifecycle(self) -> ItemLifecycle: ...
    @property
    def messages(self) -> MessageAssembler: ...
