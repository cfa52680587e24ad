"""Anthropic's `clear_thinking_20251015` edit (SPEC-agents §2.5.7), server-side, per call.

Thinking blocks (an assistant message's `meta.thinking` strings) of all but the N most recent
thinking turns are removed; those kept are sent, so from here on they cost tokens
(`meta.thinking_counted`, SPEC-agents §2.5.0.8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ..messages import Message
from . import ReplayFacts, StageContext, StageResult


def thinking_turns(h: Sequence[Message]) -> list[list[int]]:
    """Runs of assistant messages between user messages (tool and system messages do not
    separate) that hold at least one non-empty thinking list; indices of their assistants."""
    turns: list[list[int]] = []
    run: list[int] = []
    for i, m in enumerate(h):
        if m.role == "user":
            turns.append(run)
            run = []
        elif m.role == "assistant":
            run.append(i)
    turns.append(run)
    return [t for t in turns if any(h[i].meta.get("thinking") for i in t)]


def _with_thinking(m: Message, thinking: Any, counted: bool) -> Message:
    meta = dict(m.meta)
    meta["thinking"] = thinking
    meta["thinking_counted"] = counted
    return replace(m, meta=MappingProxyType(meta))


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Remove the thinking of every thinking turn but the most recent N (or keep all).

    Invariant: contents, calls and order never change; after the stage no assistant message
    outside the kept turns holds thinking, and every kept block is counted.
    """
    keep = ctx.params.get("thinking_keep") or {"type": "thinking_turns", "value": 1}
    h = tuple(history)
    turns = thinking_turns(h)
    kept_n = len(turns) if keep == "all" else min(keep["value"], len(turns))
    kept, cleared = turns[len(turns) - kept_n:], turns[:len(turns) - kept_n]
    count = ctx.counter.count
    out = list(h)
    changed: list[int] = []
    cleared_tokens = kept_tokens = 0
    for turn in cleared:
        for i in turn:
            blocks = h[i].meta.get("thinking") or ()
            if blocks:
                cleared_tokens += sum(count(t.encode("utf-8", "surrogatepass")) for t in blocks)
                out[i] = _with_thinking(h[i], [], False)
                changed.append(i)
    for turn in kept:
        for i in turn:
            blocks = h[i].meta.get("thinking") or ()
            if blocks:
                kept_tokens += sum(count(t.encode("utf-8", "surrogatepass")) for t in blocks)
                if not h[i].meta.get("thinking_counted"):
                    out[i] = _with_thinking(h[i], blocks, True)
                    changed.append(i)
    report = {
        "applied": bool(cleared), "cleared_thinking_turns": len(cleared),
        "cleared_input_tokens": cleared_tokens, "kept_thinking_turns": len(kept),
        "kept_thinking_tokens": kept_tokens,
    }
    if not changed:
        return StageResult(h, report, ())
    return StageResult(tuple(out), report, tuple(sorted(changed)))


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("cleared_thinking_turns", 0) or 0


def describe(report: Mapping[str, Any]) -> str:
    kept = (f"kept {report.get('kept_thinking_turns', 0)} thinking turn(s) "
            f"({report.get('kept_thinking_tokens', 0)} tokens, now counted)")
    if not report.get("applied"):
        return f"Nothing cleared; {kept}."
    return (f"Cleared the thinking of {report.get('cleared_thinking_turns')} turn(s) "
            f"({report.get('cleared_input_tokens')} tokens); {kept}.")


def quiet_note(facts: ReplayFacts) -> str | None:
    if facts.total("cleared_thinking_turns"):
        return None
    if not facts.total("kept_thinking_turns"):
        return "Clear thinking had nothing to do: the transcript records no thinking."
    return ("Clear thinking never cleared anything: no call had more thinking turns than it "
            f"keeps ({facts.value('thinking_keep')}).")
