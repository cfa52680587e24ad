"""AIVAX `toolContextCount` (SPEC §2.3): older tool messages keep their place, not their text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from . import ReplayFacts, StageContext, StageResult, changed_positions, handed_on


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Replace the content of every tool message but the N most recent (N = 0: off).

    Invariant: no message is added, removed or moved; `kept + replaced` = all tool messages.

    A gateway stage's work is redone at every call (nothing it makes persists), so its memo
    keeps what it made: the tool positions of the input it saw last (updated where the input
    changed, found by `changed_positions`' block compares) and one placeholder object per
    replaced message, handed out again at every call, so the replay measures each once by
    identity (issue 31: a new placeholder per older result per call was most of `aivax`'s
    quadratic replay).
    """
    count = ctx.params.get("toolContextCount") or 0
    placeholder = ctx.params.get("toolContextPlaceholder", "").encode("utf-8", "surrogatepass")
    tools = _tool_positions(history, ctx.memo)
    older = tools[: max(len(tools) - count, 0)] if count > 0 else []
    report = {"kept": len(tools) - len(older), "replaced": len(older)}
    if not older:
        return StageResult(handed_on(history), report, ())
    made: dict[int, tuple[Message, Message]] = (
        ctx.memo.setdefault("placeholders", {}) if ctx.memo is not None else {})
    out = list(history)  # indexed below: a list reads fastest whatever sequence `history` is
    for i in older:
        src = out[i]
        hit = made.get(id(src))
        if hit is None or hit[0] is not src or hit[1].content != placeholder:
            hit = made[id(src)] = (src, src.with_content(placeholder))
        out[i] = hit[1]
    return StageResult(tuple(out), report, tuple(older))


def _tool_positions(history: Sequence[Message], memo: dict[str, Any] | None) -> list[int]:
    """Positions of the tool messages of `history`, from the previous input's where the memo
    has it (a role can only change where the input holds another message)."""
    if memo is None:
        return [i for i, m in enumerate(history) if m.role == "tool"]
    seen: Sequence[Message] | None = memo.get("input")
    tools: list[int] | None = memo.get("tools")
    if seen is not None and tools is not None and len(history) >= len(seen):
        changed = changed_positions(seen, history)
        if all(history[i].role == seen[i].role for i in changed):
            tools = tools + [i for i in range(len(seen), len(history))
                             if history[i].role == "tool"]
        else:
            tools = None
    else:
        tools = None
    if tools is None:
        tools = [i for i, m in enumerate(history) if m.role == "tool"]
    memo["input"], memo["tools"] = history, tools
    return tools


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
