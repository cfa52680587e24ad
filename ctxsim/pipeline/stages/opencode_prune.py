"""OpenCode's prune of old tool output (SPEC-agents-2 §6.2 step 4), persistent.

At the end of each loop (ctxsim: when the history ends on a new user message [X]) OpenCode
walks the messages newest to oldest, past the two most recent user turns, stopping at a
summary or at an output already cleared; completed tool outputs (not of a protected tool)
beyond the newest `PRUNE_PROTECT` tokens are candidates, and when they total more than
`PRUNE_MINIMUM` each is sent as "[Old tool result content cleared]" from then on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..agents_common import is_recorded_summary
from ..messages import Message
from . import StageContext, StageResult
from ._agents2 import Sums, text
from ._opencode import CLEARED, estimate


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Clear old tool outputs as OpenCode's prune would.

    Invariant: only tool messages change, to the cleared text, and a cleared one stops every
    later walk, so each output is cleared at most once."""
    p = ctx.params
    report: dict[str, Any] = {"pruned": 0, "candidate_tokens": 0,
                              "enabled": p.get("opencode_prune", True)}
    if not p.get("opencode_prune", True) or not history or history[-1].role != "user":
        return StageResult(history, report, ())
    protect = p.get("opencode_prune_protect", 40000)
    minimum = p.get("opencode_prune_minimum", 20000)
    protected = set(p.get("opencode_protected_tools") or ())
    memo = ctx.memo if ctx.memo is not None else {}
    names: dict[str, str] = memo.setdefault("names", {})  # call id → tool, grown with the input

    def figure(h: Sequence[Message], i: int) -> int:
        """The tokens a walk could count at i: a completed, unprotected, uncleared output."""
        m = h[i]
        if m.role == "assistant":
            names.update((c.id, c.name) for c in m.tool_calls)
        if m.role != "tool" or m.is_error or m.content == CLEARED.encode() or \
                names.get(m.tool_call_id, "") in protected:
            return 0
        return estimate(text(m))

    if Sums(history, ctx, "prune_sums", figure).sums[-1] <= protect:
        return StageResult(history, report, ())  # nothing can lie past the protected window
    turns = 0
    total = 0
    candidates: list[tuple[int, int]] = []
    for i in range(len(history) - 1, -1, -1):
        m = history[i]
        if m.role == "user":
            turns += 1
        if turns < 2:
            continue
        if is_recorded_summary(m) or m.meta.get("kind") == "placeholder_summary":
            break
        if m.role != "tool" or m.is_error:
            continue
        if m.content == CLEARED.encode():
            break
        if names.get(m.tool_call_id, "") in protected:
            continue
        tokens = estimate(text(m))
        total += tokens
        if total > protect:
            candidates.append((i, tokens))
    pruned = sum(t for _, t in candidates)
    report["candidate_tokens"] = pruned
    if pruned <= minimum:
        return StageResult(history, report, ())
    out = list(history)
    for i, _ in candidates:
        out[i] = history[i].with_content(CLEARED.encode())
    report["pruned"] = len(candidates)
    return StageResult(tuple(out), report, tuple(sorted(i for i, _ in candidates)))


def activity(report: Mapping[str, Any]) -> int:
    return int(report.get("pruned") or 0)


def describe(report: Mapping[str, Any]) -> str:
    if report.get("pruned"):
        return (f"Pruned {report['pruned']} old tool outputs (~{report['candidate_tokens']:,} "
                "tokens).")
    return f"Nothing pruned: {report.get('candidate_tokens', 0):,} candidate tokens."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    return ("OpenCode's prune never fired: beyond the newest "
            f"{facts.value('opencode_prune_protect'):,} tokens of tool output (and the two "
            f"latest turns) there were never over {facts.value('opencode_prune_minimum'):,} "
            "tokens to clear.")
