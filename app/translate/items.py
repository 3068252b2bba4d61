"""Item identity and the legacy item lifecycle rules (behavior §5.4 and §5.5)."""

from __future__ import annotations

import copy
from json.encoder import encode_basestring
from typing import Any

from app.events.model import ITEM_COMPLETED, ITEM_DELTA, ITEM_STARTED, EventDraft


class ItemIds:
    """``itm_<n>`` per session; every native id keeps the item id it was first given."""

    def __init__(self) -> None:
        self._n = 0
        self._by_native: dict[str, str] = {}

    def continue_numbering(self, count: int) -> None:
        """Items of an earlier run of the session took the numbers up to ``count``."""
        self._n = max(self._n, count)

    def fresh(self) -> str:
        self._n += 1
        return f"itm_{self._n}"

    def for_native(self, native_id: str | None) -> str:
        if native_id is None or native_id == "":
            return self.fresh()
        item_id = self._by_native.get(native_id)
        if item_id is None:
            item_id = self._by_native[native_id] = self.fresh()
        return item_id

    def bind(self, native_id: str | None, item_id: str) -> None:
        """An item id the agent chose (``_meta["sandbox-agent/itemId"]``) for this native id."""
        if native_id:
            self._by_native.setdefault(native_id, item_id)

    def known(self, native_id: str) -> str | None:
        return self._by_native.get(native_id)

    def parent(self, parent_id: str | None) -> str | None:
        """A parent not starting with ``itm_`` is a native id and is mapped."""
        if parent_id is None or parent_id.startswith("itm_"):
            return parent_id
        return self.for_native(parent_id)


def make_item(
    *,
    item_id: str,
    native_item_id: str | None,
    kind: str,
    role: str | None,
    content: list[dict[str, Any]],
    status: str,
    parent_id: str | None = None,
) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "native_item_id": native_item_id,
        "parent_id": parent_id,
        "kind": kind,
        "role": role,
        "content": content,
        "status": status,
    }


class ItemLifecycle:
    """Enforces started -> delta* -> completed per item, adding what the legacy daemon added."""

    def __init__(self) -> None:
        self._started: set[str] = set()
        self._delta_seen: set[str] = set()
        self._delta_head: tuple[tuple[str, str | None] | None, str] = (None, "")

    def started(self, item: dict[str, Any], *, raw: Any = None, synthetic: bool = False) -> list[EventDraft]:
        item_id = item["item_id"]
        if item_id in self._started:
            return []  # a second item.started is dropped (§5.5 rule 4)
        self._started.add(item_id)
        return [EventDraft(ITEM_STARTED, {"item": item}, synthetic=synthetic, raw=raw)]

    def delta(
        self, item_id: str, native_item_id: str | None, delta: str, *, raw: Any = None, synthetic: bool = False
    ) -> list[EventDraft]:
        self._delta_seen.add(item_id)
        data = {"item_id": item_id, "native_item_id": native_item_id, "delta": delta}
        return [EventDraft(ITEM_DELTA, data, synthetic=synthetic, raw=raw)]

    def delta_draft(self, item_id: str, native_item_id: str | None, delta: str, raw: Any) -> EventDraft:
        """One agent item.delta (the hot path of streamed text): its JSON is written here, with
        the ids' part made once per item, rather than by the generic encoder for every chunk."""
        self._delta_seen.add(item_id)
        key, head = self._delta_head
        if key != (item_id, native_item_id):
            native = "null" if native_item_id is None else encode_basestring(native_item_id)
            head = f'{{"item_id":{encode_basestring(item_id)},"native_item_id":{native},"delta":'
            self._delta_head = ((item_id, native_item_id), head)
        data = {"item_id": item_id, "native_item_id": native_item_id, "delta": delta}
        # (positional: type, data, synthetic, raw, native_session_id, data_json)
        return EventDraft(ITEM_DELTA, data, False, raw, None, head + encode_basestring(delta) + "}")

    def completed(self, item: dict[str, Any], *, raw: Any = None, synthetic: bool = False) -> list[EventDraft]:
        item_id = item["item_id"]
        out: list[EventDraft] = []
        if item_id not in self._started:
            self._started.add(item_id)
            started = copy.deepcopy(item)
            started["status"] = "in_progress"
            out.append(EventDraft(ITEM_STARTED, {"item": started}, synthetic=True, raw=raw))
        if item["kind"] == "message" and item.get("role") != "user" and item_id not in self._delta_seen:
            texts = [part["text"] for part in item["content"] if part.get("type") == "text"]
            if texts:
                self._delta_seen.add(item_id)
                data = {"item_id": item_id, "native_item_id": item["native_item_id"], "delta": "\n".join(texts)}
                out.append(EventDraft(ITEM_DELTA, data, synthetic=True, raw=raw))
        out.append(EventDraft(ITEM_COMPLETED, {"item": item}, synthetic=synthetic, raw=raw))
        return out
