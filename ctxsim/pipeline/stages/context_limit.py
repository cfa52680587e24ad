"""AIVAX `contextMaximumSize` / `contextOverflowAction` (SPEC §2.3)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..messages import Message
from ..tokens import extras_tokens, tokens_by_identity
from . import ReplayFacts, StageContext, StageResult, handed_on, other_objects

OVERFLOW = "context_overflow"


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
    window = _Window.of(history, ctx)
    conversation = window.total
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
    # Removing the earliest removable unit until the conversation fits is removing the
    # shortest run of units, in order, whose tokens reach the excess.
    window.cut(conversation - limit)
    removed, kept = window.split(history)
    after = conversation - window.cut_tokens + extras
    report.update(
        tokens_after=after,
        removed=len(removed),
        removed_indices=removed,
        over_after_truncation=after > limit,
    )
    if action == "TruncateHard" and after > limit:
        report["error"] = OVERFLOW
    return StageResult(kept if removed else handed_on(history), report,
                       None if removed else ())


class _Window:
    """What the stage knows of its input, kept across calls by its memo: each message's
    tokens and their total, the last user message, the units Truncate removes, and where the
    previous truncation cut.

    A unit is what Truncate removes at once: an assistant message with its results (SPEC
    §2.3's owners), or any other message but a system-role one or an owned result. Its leader
    is its first message (`_unit_of[i]`: the leader of position i's unit). Every unit led
    before the cut (`at`) is removed but the last user message's, and `cut_tokens` are their
    tokens. A gateway stage sees a history that only grew since the previous call, but for a
    few messages rewritten in place (issue 31: recounting every message and scanning the whole
    history at every call made `aivax` quadratic), so the memo updates these where the input
    holds other objects than it saw last (`other_objects`, in C) and for the appended ones,
    and the cut moves from where it was by the units that changed; a rewritten message whose
    role, calls or call id differ, or a shorter input, make it start again."""

    __slots__ = ("at", "costs", "cut_tokens", "last_user", "total", "_input", "_latest",
                 "_lead", "_positions", "_systems", "_unit_of", "_unit_tokens")

    def __init__(self) -> None:
        self.costs: list[int] = []
        self.total = 0
        self.last_user: int | None = None
        self.at = 0
        self.cut_tokens = 0
        self._lead: list[bool] = []  # leads a unit that is not a system message
        self._unit_of: list[int] = []
        self._unit_tokens: list[int] = []  # a leader's: its whole unit's tokens
        self._systems: list[int] = []
        # 0, 1, 2...: the report's positions are slices of it, copied, not new numbers.
        self._positions: list[int] = []
        self._latest: dict[str, int] = {}  # tool call id -> the latest assistant issuing it
        self._input: Sequence[Message] = ()

    @classmethod
    def of(cls, history: Sequence[Message], ctx: StageContext) -> _Window:
        memo = ctx.memo
        measured: dict[int, tuple[Message, int]] = (
            memo.setdefault("measured", {}) if memo is not None else {})

        def cost(m: Message) -> int:
            return tokens_by_identity(measured, m, ctx.counter)

        window: _Window | None = memo.get("window") if memo is not None else None
        if window is None or not window._update(history, cost):
            window = cls()
            window._extend(history, 0, cost)
        window._input = history
        if memo is not None:
            memo["window"] = window
        return window

    def _before_cut(self, leader: int) -> bool:
        """Whether the unit led at `leader` is one the cut removes."""
        return leader < self.at and self._lead[leader] and leader != self.last_user

    def _extend(self, history: Sequence[Message], start: int,
                cost: Callable[[Message], int]) -> None:
        costs, latest, lead = self.costs, self._latest, self._lead
        unit_of, unit_tokens = self._unit_of, self._unit_tokens
        for i in range(start, len(history)):
            m = history[i]
            tokens = cost(m)
            costs.append(tokens)
            self.total += tokens
            leader = i
            if m.role == "assistant":
                for c in m.tool_calls:
                    latest[c.id] = i
            elif m.role == "tool":
                leader = latest.get(m.tool_call_id, i)
            elif m.role == "user":
                protected, self.last_user = self.last_user, i
                if protected is not None and self._before_cut(protected):
                    self.cut_tokens += unit_tokens[protected]  # no longer the last user
            elif m.role == "system":
                self._systems.append(i)
            lead.append(leader == i and m.role != "system")
            unit_of.append(leader)
            self._positions.append(i)
            unit_tokens.append(tokens if leader == i else 0)
            if leader != i:
                unit_tokens[leader] += tokens
                if self._before_cut(leader):
                    self.cut_tokens += tokens

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
            more = cost(new) - self.costs[i]
            self.costs[i] += more
            self.total += more
            leader = self._unit_of[i]
            self._unit_tokens[leader] += more
            if self._before_cut(leader):
                self.cut_tokens += more
        self._extend(history, len(seen), cost)
        return True

    def cut(self, excess: int) -> None:
        """Move the cut to just past the shortest run of removable units, from the first,
        whose tokens reach `excess` (all of them when none does)."""
        at, tokens, n = self.at, self.cut_tokens, len(self.costs)
        lead, unit_tokens, protected = self._lead, self._unit_tokens, self.last_user
        while tokens < excess and at < n:
            if lead[at] and at != protected:
                tokens += unit_tokens[at]
            at += 1
        while at > 0:  # give back the last units the excess does not need
            last = at - 1
            while last >= 0 and not (lead[last] and last != protected):
                last -= 1
            if last < 0 or tokens - unit_tokens[last] < excess:
                at = last + 1
                break
            tokens -= unit_tokens[last]
            at = last
        self.at, self.cut_tokens = at, tokens

    def split(self, history: Sequence[Message]) -> tuple[list[int], tuple[Message, ...]]:
        """The positions the cut removes, ascending, and the messages it keeps: below it
        only system messages and the last user message stay, past it only the results of
        units it removed go. The work is the messages past the cut and the runs of removed
        positions (copied in C), not a scan of the history."""
        at, unit_of, positions = self.at, self._unit_of, self._positions
        stay = self._systems[:bisect_left(self._systems, at)]
        if self.last_user is not None and self.last_user < at:
            stay.insert(bisect_left(stay, self.last_user), self.last_user)
        removed: list[int] = []
        start = 0
        for i in stay:
            removed.extend(positions[start:i])
            start = i + 1
        removed.extend(positions[start:at])
        units = unit_of[at:]
        removed.extend(i for i, u in enumerate(units, at) if u < at)
        kept = [*map(history.__getitem__, stay),
                *(m for m, u in zip(history[at:], units, strict=True) if u >= at)]
        return removed, tuple(kept)


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
