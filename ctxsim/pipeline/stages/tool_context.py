"""AIVAX `toolContextCount` (SPEC §2.3): older tool messages keep their place, not their text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from . import ReplayFacts, StageContext, StageResult


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Replace the content of every tool message but the N most recent (N = 0: off).

    Invariant: no message is added, removed or moved; `kept + replaced` = all tool messages.
    """
    count = ctx.params.get("toolContextCount") or 0
    placeholder = ctx.params.get("toolContextPlaceholder", "").encode("utf-8", "surrogatepass")
    tools = [i for i, m in enumerate(history) if m.role == "tool"]
    older = tools[: max(len(tools) - count, 0)] if count > 0 else []
    out = list(history)  # indexed below: a list reads fastest whatever sequence `history` is
    for i in older:
        out[i] = out[i].with_content(placeholder)
    report = {"kept": len(tools) - len(older), "replaced": len(older)}
    return StageResult(tuple(out), report)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("replaced", 0)


def describe(report: Mapping[str, Any]) -> str:
    return f"{report.get('kept', 0)} tool messages kept, {report.get('replaced', 0)} replaced."


def quiet_note(facts: ReplayFacts) -> str | None:
    if facts.total("replaced"):
        return None
    count = facts.value("toolContextCount")
    return "Tool context never replaced a result: " + (
        "it is off (toolContextCount 0)." if not count
        else f"no call held more than {count} tool messages."
    )
