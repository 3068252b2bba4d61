"""Every mock command, put together from the modules that define them.

A module of scripts lists its own in ``COMMANDS`` (by first word) and ``EXACT`` (whole message,
case-insensitive); a new module is added to the tuples below.
"""

from __future__ import annotations

from . import bench, files, hitl_script, memory, rich, script, usage
from .script import Context, Script, Step, say

COMMANDS: dict[str, Script] = {
    name: fn
    for module in (script, rich, hitl_script, files, bench, memory, usage)
    for name, fn in module.COMMANDS.items()
}
EXACT_PROMPTS: dict[str, Script] = {
    prompt.lower(): fn for module in (script, rich, hitl_script) for prompt, fn in module.EXACT.items()
}


def _echo_reply(ctx: Context) -> list[Step]:
    return say(ctx.id("reply"), ctx.message)


def script_for(ctx: Context) -> list[Step]:
    """The steps for one prompt. An empty message gives no steps (legacy: nothing after turn.started)."""
    if not ctx.message:
        return []
    exact_script = EXACT_PROMPTS.get(ctx.message.lower())
    if exact_script is not None:
        return exact_script(ctx)
    script_ = COMMANDS.get(ctx.words[0].lower())
    if script_ is not None:
        return script_(ctx)
    return _echo_reply(ctx)
