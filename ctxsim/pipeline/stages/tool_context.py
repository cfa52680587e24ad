"""AIVAX `toolContextCount` (SPEC §2.3): older tool messages keep their place, not their text."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message
from . import StageContext, StageResult


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Replace the content of every tool message but the N most recent (N = 0: off).

    Invariant: no message is added, removed or moved; `kept + replaced` = all tool messages.
    """
    count = ctx.params.get("toolContextCount") or 0
    placeholder = ctx.params.get("toolContextPlaceholder", "").encode("utf-8", "surrogatepass")
    tools = [i for i, m in enumerate(history) if m.role == "tool"]
    older = tools[: max(len(tools) - count, 0)] if count > 0 else []
    out = list(history)
    for i in older:
        out[i] = history[i].with_content(placeholder)
    report = {"kept": len(tools) - len(older), "replaced": len(older)}
    return StageResult(tuple(out), report)
