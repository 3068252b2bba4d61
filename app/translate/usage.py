"""Tokens and cost: what an agent says a turn used, and the session's totals. No I/O.

Agents tell it three ways, all read here:

- the ``session/prompt`` result's ``usage`` (ACP, unstable): this turn's ``inputTokens``,
  ``outputTokens``, ``totalTokens``, ``thoughtTokens?``, ``cachedReadTokens?``, ``cachedWriteTokens?``
  (claude, codex, opencode; opencode counts only the turn's last model call);
- else the result's ``_meta.quota.token_count`` (gemini: ``input_tokens``, ``output_tokens``; codex's
  names too: ``cachedInputTokens``, ``reasoningOutputTokens``);
- ``usage_update`` (ACP): ``used``/``size``, the context window now, and ``cost {amount, currency}``,
  the session's cost so far (claude, opencode): a turn's cost is how much it rose during the turn
  (a fall means the agent started counting again: the new amount is the turn's).

``turn.ended`` metadata then has ``usage`` (the token counts above that the agent gave, with
``totalTokens`` made as input + output when it gave none), ``cost`` (``{amount, currency}``, this
turn's) and ``context`` (``{used, size}``), each only when known. ``Totals`` sums them per session
(SessionInfo ``_meta["sandbox-agent/usage"]``). For codex, as legacy showed it, the turn's usage is
also a ``status`` item labelled ``thread.token_usage.updated`` (:func:`legacy_status_detail`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# ACP's PromptResponse.usage keys, in the order shown.
TOKEN_KEYS = ("inputTokens", "outputTokens", "cachedReadTokens", "cachedWriteTokens", "thoughtTokens", "totalTokens")
# Other names agents use in `_meta.quota.token_count` -> ACP's.
_QUOTA_NAMES = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cachedInputTokens": "cachedReadTokens",
    "cached_input_tokens": "cachedReadTokens",
    "cacheWriteInputTokens": "cachedWriteTokens",
    "reasoningOutputTokens": "thoughtTokens",
    "reasoning_output_tokens": "thoughtTokens",
    "thoughts_tokens": "thoughtTokens",
    "total_tokens": "totalTokens",
}
USAGE_META = "sandbox-agent/usage"
LEGACY_USAGE_LABEL = "thread.token_usage.updated"  # legacy's status item for codex's token usage
_CURRENCY_LIMIT = 8  # distinct currencies summed per session (an agent could send any string)


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _tokens(block: Any, names: dict[str, str]) -> dict[str, int]:
    found: dict[str, int] = {}
    if not isinstance(block, dict):
        return found
    for key, value in block.items():
        name = key if key in TOKEN_KEYS else names.get(key)
        count = _count(value)
        if name is not None and count is not None and name not in found:
            found[name] = count
    return found


def turn_tokens(result: Any) -> dict[str, int] | None:
    """The token counts of a ``session/prompt`` result, under ACP's names, in ACP's order."""
    if not isinstance(result, dict):
        return None
    found = _tokens(result.get("usage"), {})
    if not found:
        meta = result.get("_meta")
        quota = meta.get("quota") if isinstance(meta, dict) else None
        found = _tokens(quota.get("token_count") if isinstance(quota, dict) else None, _QUOTA_NAMES)
    if not found:
        return None
    if "totalTokens" not in found and ("inputTokens" in found or "outputTokens" in found):
        found["totalTokens"] = found.get("inputTokens", 0) + found.get("outputTokens", 0)
    return {key: found[key] for key in TOKEN_KEYS if key in found}


def cost_of(value: Any) -> tuple[float, str] | None:
    """``{amount, currency}`` as (amount, currency); None when it is not one."""
    if not isinstance(value, dict):
        return None
    amount, currency = value.get("amount"), value.get("currency")
    if not isinstance(amount, int | float) or isinstance(amount, bool) or not 0 <= amount < float("inf"):
        return None  # NaN, negative, infinite
    if not isinstance(currency, str) or not currency or len(currency) > 16:
        return None
    return float(amount), currency


def _money(amount: float) -> float:
    return round(amount, 10)  # the agents' sums of floats, without their noise


@dataclass(slots=True)
class TurnUsage:
    """What one turn used, as turn.ended shows it."""

    tokens: dict[str, int] | None = None
    cost: tuple[float, str] | None = None
    context: dict[str, int] | None = None

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.tokens:
            out["usage"] = dict(self.tokens)
        if self.cost is not None:
            out["cost"] = {"amount": _money(self.cost[0]), "currency": self.cost[1]}
        if self.context:
            out["context"] = dict(self.context)
        return out


@dataclass(slots=True)
class Totals:
    """A session's usage over its turns, and what the agent last said its cost was."""

    turns: int = 0  # turns whose usage the agent told
    tokens: dict[str, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)  # currency -> amount
    # The agent's running cost (usage_update) at the end of the last turn, per currency.
    agent_cost: dict[str, float] = field(default_factory=dict)
    # In the running turn: the agent's running cost (usage_update) and context window, if told.
    turn_cost: tuple[float, str] | None = None
    context: dict[str, int] | None = None

    def usage_update(self, update: dict[str, Any]) -> None:
        used, size = _count(update.get("used")), _count(update.get("size"))
        if used is not None and size is not None:
            self.context = {"used": used, "size": size}
        cost = cost_of(update.get("cost"))
        if cost is not None:
            self.turn_cost = cost

    def end_turn(self, result: Any) -> TurnUsage:
        """What the turn that ``result`` ends used; added to the totals."""
        turn = TurnUsage(turn_tokens(result), None, self.context)
        if self.turn_cost is not None:
            amount, currency = self.turn_cost
            before = self.agent_cost.get(currency, 0.0)
            turn.cost = (amount - before if amount >= before else amount, currency)
            if currency in self.agent_cost or len(self.agent_cost) < _CURRENCY_LIMIT:
                self.agent_cost[currency] = amount
            self.turn_cost = None
        if turn.tokens or turn.cost is not None:
            self.turns += 1
        for key, count in (turn.tokens or {}).items():
            self.tokens[key] = self.tokens.get(key, 0) + count
        if turn.cost is not None and (turn.cost[1] in self.cost or len(self.cost) < _CURRENCY_LIMIT):
            self.cost[turn.cost[1]] = self.cost.get(turn.cost[1], 0.0) + turn.cost[0]
        return turn

    def info(self) -> dict[str, Any] | None:
        """SessionInfo ``_meta["sandbox-agent/usage"]``: the totals, None before any usage was told.
        ``cost`` is ``{amount, currency}`` (a list of them if the agent used several currencies)."""
        if not self.turns:
            return None
        out: dict[str, Any] = {"turns": self.turns}
        out.update((key, self.tokens[key]) for key in TOKEN_KEYS if key in self.tokens)
        costs = [{"amount": _money(amount), "currency": currency} for currency, amount in self.cost.items()]
        if costs:
            out["cost"] = costs[0] if len(costs) == 1 else costs
        return out

    def restore(self, info: Any, agent_cost: Any) -> None:
        """The totals of a session of an earlier run (its SessionInfo ``_meta`` and the agent's
        running cost as last seen, from its saved record)."""
        if not isinstance(info, dict):
            return
        self.turns = _count(info.get("turns")) or 0
        self.tokens = {key: count for key in TOKEN_KEYS if (count := _count(info.get(key))) is not None}
        saved = info.get("cost")
        for entry in saved if isinstance(saved, list) else [saved]:
            cost = cost_of(entry)
            if cost is not None:
                self.cost[cost[1]] = cost[0]
        if isinstance(agent_cost, dict):
            for currency, amount in agent_cost.items():
                cost = cost_of({"amount": amount, "currency": currency})
                if cost is not None and len(self.agent_cost) < _CURRENCY_LIMIT:
                    self.agent_cost[currency] = cost[0]


def _breakdown(tokens: dict[str, int]) -> dict[str, int]:
    """Codex's names for token counts (its app-server's TokenUsageBreakdown), as legacy showed them."""
    return {
        "cachedInputTokens": tokens.get("cachedReadTokens", 0),
        "inputTokens": tokens.get("inputTokens", 0),
        "outputTokens": tokens.get("outputTokens", 0),
        "reasoningOutputTokens": tokens.get("thoughtTokens", 0),
        "totalTokens": tokens.get("totalTokens", 0),
    }


def legacy_status_detail(native_session_id: str | None, turn_id: str, turn: TurnUsage, totals: Totals) -> str:
    """The ``detail`` of legacy's ``thread.token_usage.updated`` status item: codex's notification
    ``{threadId, turnId, tokenUsage: {total, last, modelContextWindow}}`` as JSON text."""
    usage: dict[str, Any] = {"total": _breakdown(totals.tokens), "last": _breakdown(turn.tokens or {})}
    usage["modelContextWindow"] = turn.context["size"] if turn.context else None
    body = {"threadId": native_session_id, "turnId": turn_id, "tokenUsage": usage}
    return json.dumps(body, separators=(",", ":"))
