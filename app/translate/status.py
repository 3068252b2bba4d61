"""Updates shown as ``status`` items: plans, notices, compaction.

Each update is a snapshot, so each one gives a complete item at once (item.started then
item.completed, both from that update), kind ``status``, role assistant, content a ``status`` part
(label = what it is, detail = a short summary) and a ``json`` part holding the payload:

- ``plan`` (v1, whole plan each time) and v2 ``plan_update``: label ``plan``, detail ``<done>/<total>
  completed`` for item plans, json ``{planId, entries}`` (``main`` is the plan id of v1 plans, as the
  v2 migration guide says), or the plan object itself for markdown/file plans (markdown also as text);
- v2 ``plan_removed``: label ``plan``, detail ``removed``, json ``{planId, removed: true}``;
- unstable ``notice``: label ``notice``, detail the title, json the notice;
- unstable ``compaction_update``: label ``compaction``, detail its status/phase, json the update.

Unstable ``compaction_summary_chunk`` streams the summary text into a ``system`` item instead
(see ``session.py``).
"""

from __future__ import annotations

from typing import Any, Protocol

from app.events.model import EventDraft

from .content import meta_str
from .handler import ItemTranslator
from .items import make_item


class _Plans(Protocol):
    plans: dict[str, Any]


class Translator(ItemTranslator, Protocol):
    """What these handlers use of the session's ``SessionTranslator`` (which imports this module)."""

    @property
    def state(self) -> _Plans: ...


V1_PLAN_ID = "main"


def status_item(
    t: Translator, update: dict[str, Any], raw: Any, label: str, detail: str | None, extra: list[dict[str, Any]]
) -> list[EventDraft]:
    out = t.messages.close()
    native = meta_str(update, "nativeItemId")
    item_id = meta_str(update, "itemId")
    if item_id:
        t.ids.bind(native, item_id)
    else:
        item_id = t.ids.for_native(native)
    parent = meta_str(update, "parentId")
    content = [{"type": "status", "label": label, "detail": detail}, *extra]
    item = make_item(
        item_id=item_id,
        native_item_id=native,
        kind="status",
        role="assistant",
        content=content,
        status="in_progress",
        parent_id=t.ids.parent(parent) if parent else None,
    )
    out.extend(t.lifecycle.started(item, raw=raw))
    done = dict(item, status="completed", content=[dict(part) for part in content])
    out.extend(t.lifecycle.completed(done, raw=raw))
    return out


def usage_item(t: Translator, label: str, detail: str, raw: Any) -> list[EventDraft]:
    """A turn's token usage as legacy showed codex's: a completed system status item without a
    native id (its item.started made by the bridge, as legacy's daemon did)."""
    content = [{"type": "status", "label": label, "detail": detail}]
    item = make_item(
        item_id=t.ids.for_native(None),
        native_item_id=None,
        kind="status",
        role="system",
        content=content,
        status="completed",
    )
    return t.lifecycle.completed(item, raw=raw)


def entries_summary(entries: list[Any]) -> str:
    valid = [e for e in entries if isinstance(e, dict)]
    done = sum(1 for e in valid if e.get("status") == "completed")
    return f"{done}/{len(valid)} completed"


def plan(t: Translator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    entries = update["entries"]
    t.state.plans[V1_PLAN_ID] = entries
    body = {"planId": V1_PLAN_ID, "entries": entries}
    return status_item(t, update, raw, "plan", entries_summary(entries), [{"type": "json", "json": body}])


def plan_update(t: Translator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    plan_obj = update["plan"]
    plan_id = plan_obj.get("planId") if isinstance(plan_obj.get("planId"), str) else V1_PLAN_ID
    if plan_obj["type"] == "items":
        entries = plan_obj["entries"]
        t.state.plans[plan_id] = entries
        body = {"planId": plan_id, "entries": entries}
        return status_item(t, update, raw, "plan", entries_summary(entries), [{"type": "json", "json": body}])
    t.state.plans[plan_id] = plan_obj
    extra: list[dict[str, Any]] = []
    markdown = plan_obj.get("content")
    if plan_obj["type"] == "markdown" and isinstance(markdown, str):
        extra.append({"type": "text", "text": markdown})
    extra.append({"type": "json", "json": plan_obj})
    return status_item(t, update, raw, "plan", plan_obj["type"], extra)


def plan_removed(t: Translator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    plan_id = update["planId"]
    t.state.plans.pop(plan_id, None)
    body = {"planId": plan_id, "removed": True}
    return status_item(t, update, raw, "plan", "removed", [{"type": "json", "json": body}])


def _payload(update: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in update.items() if k != "sessionUpdate"}


def notice(t: Translator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    return status_item(t, update, raw, "notice", update["title"], [{"type": "json", "json": _payload(update)}])


def compaction_update(t: Translator, update: dict[str, Any], raw: Any) -> list[EventDraft]:
    detail = next((update[k] for k in ("status", "phase", "state") if isinstance(update.get(k), str)), None)
    return status_item(t, update, raw, "compaction", detail, [{"type": "json", "json": _payload(update)}])
