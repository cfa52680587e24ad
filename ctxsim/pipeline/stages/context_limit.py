"""AIVAX `contextMaximumSize` / `contextOverflowAction` (SPEC §2.3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from ..tokens import extras_tokens, message_tokens
from . import ReplayFacts, StageContext, StageResult
from ._ownership import result_owners

OVERFLOW = "context_overflow"


def removal_units(history: Sequence[Message]) -> dict[int, list[int]]:
    """For each assistant with calls, itself plus every result belonging to it."""
    units: dict[int, list[int]] = {}
    for j, owner in result_owners(history).items():
        if owner is not None:
            units.setdefault(owner, []).append(j)
    return units


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Throw, Truncate or TruncateHard against the limit ("over" = strictly greater).

    Invariant: Truncate never removes a system message or the last user message, and never
    removes a call while leaving one of its results; it stops at the first fit.
    """
    history = tuple(history)  # read by index below, where a tuple is fastest
    limit = ctx.params.get("contextMaximumSize")
    action = ctx.params.get("contextOverflowAction", "Throw")
    extras = extras_tokens(
        ctx.counter, ctx.params.get("systemInstructions") or "", ctx.tools, ctx.response_schema
    )
    costs = [message_tokens(m, ctx.counter) for m in history]
    conversation = sum(costs)
    before = conversation + extras
    report: dict[str, Any] = {
        "limit": limit,
        "action": action,
        "tokens_before": before,
        "tokens_after": before,
        "removed": 0,
        "removed_indices": [],
        "error": None,
        "over_after_truncation": False,
    }
    if limit is None:
        return StageResult(tuple(history), report)
    if action == "Throw":
        if before > limit:
            report["error"] = OVERFLOW
        return StageResult(tuple(history), report)
    users = [i for i, m in enumerate(history) if m.role == "user"]
    protected_user = users[-1] if users else None
    units = removal_units(history)
    removed: set[int] = set()
    cursor = 0
    while conversation > limit:
        # Earliest remaining message that is neither system nor the last user message.
        while cursor < len(history) and (
            cursor in removed
            or history[cursor].role == "system"
            or cursor == protected_user
        ):
            cursor += 1
        if cursor >= len(history):
            break
        unit = [cursor, *units.get(cursor, ())] if history[cursor].has_calls else [cursor]
        for i in unit:
            if i not in removed:
                removed.add(i)
                conversation -= costs[i]
    after = conversation + extras
    report.update(
        tokens_after=after,
        removed=len(removed),
        removed_indices=sorted(removed),
        over_after_truncation=after > limit,
    )
    if action == "TruncateHard" and after > limit:
        report["error"] = OVERFLOW
    out = tuple(m for i, m in enumerate(history) if i not in removed)
    return StageResult(out if removed else tuple(history), report)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("removed", 0) + (1 if report.get("error") else 0)


def describe(report: Mapping[str, Any]) -> str:
    if report.get("limit") is None:
        return "No limit set."
    text = (f"{report.get('tokens_before')} → {report.get('tokens_after')} tokens against a "
            f"limit of {report.get('limit')} ({report.get('action')}); "
            f"{report.get('removed', 0)} message(s) removed.")
    if report.get("error"):
        text += " The call FAILED: context_overflow."
    return text


def quiet_note(facts: ReplayFacts) -> str | None:
    limit = facts.value("contextMaximumSize")
    if limit is None:
        return "The context limit never applied: contextMaximumSize is unset."
    if any(activity(r) for r in facts.reports):
        return None
    peak = max((r.get("tokens_before", 0) for r in facts.reports), default=0)
    return (f"The context limit never fired: the prompt estimate peaked at {peak} tokens, "
            f"within the limit of {limit}.")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    """The chart's limit line: the gateway's limit (none when unset)."""
    return "context limit", values.get("contextMaximumSize")


def instructions(values: Mapping[str, Any]) -> str:
    """The gateway's own system instructions: part of every full prompt it sees."""
    return values.get("systemInstructions") or ""
