"""AIVAX `contextMaximumSize` / `contextOverflowAction` (SPEC §2.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message
from ..tokens import extras_tokens, message_tokens
from . import StageContext, StageResult
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
