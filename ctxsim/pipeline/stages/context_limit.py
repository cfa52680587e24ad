"""AIVAX `contextMaximumSize` / `contextOverflowAction` (SPEC §2.3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..messages import Message
from ..tokens import extras_tokens, tokens_by_identity
from . import ReplayFacts, StageContext, StageResult, handed_on, other_objects
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
    seen = _Seen.of(history, ctx)
    conversation = seen.total
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
        return StageResult(handed_on(history), report, ())
    if action == "Throw" or conversation <= limit:
        if action == "Throw" and before > limit:
            report["error"] = OVERFLOW
        elif action == "TruncateHard" and before > limit:
            report.update(over_after_truncation=True, error=OVERFLOW)
        elif action != "Throw":
            report["over_after_truncation"] = before > limit
        return StageResult(handed_on(history), report, ())
    costs, units, protected_user = seen.costs, seen.units, seen.last_user
    removed: set[int] = set()
    cursor = 0
    n = len(history)
    while conversation > limit:
        # Earliest remaining message that is neither system nor the last user message.
        while cursor < n and (
            cursor in removed
            or history[cursor].role == "system"
            or cursor == protected_user
        ):
            cursor += 1
        if cursor >= n:
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
    return StageResult(out if removed else handed_on(history), report,
                       None if removed else ())


class _Seen:
    """What the stage knows of its input: each message's tokens and their total, the last user
    message, and the removal units (`removal_units`). A gateway stage sees a history that only
    grew since the previous call, but for a few messages (issue 31: recounting and copying
    every message at every call made `aivax` quadratic, 49.6 s for 2,000 calls), so with a
    memo these are updated where the input holds other messages than the one it saw last
    (`changed_positions`: block compares) and for the appended ones; a changed message whose
    role, calls or call id differ makes it look at everything again."""

    __slots__ = ("costs", "last_user", "total", "units", "_latest", "_input")

    def __init__(self) -> None:
        self.costs: list[int] = []
        self.total = 0
        self.last_user: int | None = None
        self.units: dict[int, list[int]] = {}
        self._latest: dict[str, int] = {}  # tool call id -> the latest assistant issuing it
        self._input: Sequence[Message] = ()

    @classmethod
    def of(cls, history: Sequence[Message], ctx: StageContext) -> _Seen:
        memo = ctx.memo
        measured: dict[int, tuple[Message, int]] = (
            memo.setdefault("measured", {}) if memo is not None else {})

        def cost(m: Message) -> int:
            return tokens_by_identity(measured, m, ctx.counter)

        seen: _Seen | None = memo.get("seen") if memo is not None else None
        if seen is None or not seen._update(history, cost):
            seen = cls()
            seen._extend(history, 0, cost)
        seen._input = history
        if memo is not None:
            memo["seen"] = seen
        return seen

    def _extend(self, history: Sequence[Message], start: int,
                cost: Callable[[Message], int]) -> None:
        costs, units, latest = self.costs, self.units, self._latest
        for i in range(start, len(history)):
            m = history[i]
            tokens = cost(m)
            costs.append(tokens)
            self.total += tokens
            if m.role == "assistant":
                for c in m.tool_calls:
                    latest[c.id] = i
            elif m.role == "tool":
                owner = latest.get(m.tool_call_id)
                if owner is not None:
                    units.setdefault(owner, []).append(i)
            elif m.role == "user":
                self.last_user = i

    def _update(self, history: Sequence[Message], cost: Callable[[Message], int]) -> bool:
        seen = self._input
        if len(history) < len(seen):
            return False
        changed = other_objects(seen, history)  # by identity: equal messages may cost apart
        for i in changed:
            old, new = seen[i], history[i]
            if (old.role != new.role or old.tool_calls != new.tool_calls
                    or old.tool_call_id != new.tool_call_id):
                return False
            tokens = cost(new)
            self.total += tokens - self.costs[i]
            self.costs[i] = tokens
        self._extend(history, len(seen), cost)
        return True


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
