"""``usage <input> <output> [<cost>]``: the mock reports what its turn used, as ACP agents do: the
session's running cost in USD as ``usage_update`` (``used``/``size`` too), the turn's tokens as the
prompt result's ``usage``."""

from __future__ import annotations

from .script import Context, Script, Step, say, update

CONTEXT_SIZE = 200_000


def _usage(ctx: Context) -> list[Step]:
    words = ctx.words[1:]
    try:
        input_tokens, output_tokens = int(words[0]), int(words[1])
        cost = float(words[2]) if len(words) > 2 else None
    except (IndexError, ValueError):
        return say(ctx.id("usage"), "Usage: usage <input> <output> [<cost>]")
    used: dict[str, object] = {
        "sessionUpdate": "usage_update",
        "used": input_tokens + output_tokens,
        "size": CONTEXT_SIZE,
    }
    if cost is not None:
        running = float(ctx.session.get("cost", 0.0)) + cost
        ctx.session["cost"] = running
        used["cost"] = {"amount": running, "currency": "USD"}
    ctx.result_fields["usage"] = {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
    }
    return [*say(ctx.id("reply"), f"Used {input_tokens} + {output_tokens} tokens."), update(used)]


COMMANDS: dict[str, Script] = {"usage": _usage}
