"""Pairing repair (behaviour file §1; SPEC §2.2 row 8 for the documented variant).

Implemented: ChatCLI's positional, block-scoped repair. Documented: global id sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..history import frozen
from ..messages import Message
from . import ReplayFacts, StageContext, StageResult, changed_since

SYNTHETIC_CONTENT = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)
# The documentation shows a line break between the two sentences (SPEC §2.2 row 7).
SYNTHETIC_CONTENT_DOCUMENTED = SYNTHETIC_CONTENT.replace("silently. Do", "silently.\nDo")
SYNTHETIC_ERROR_CODE = "missing_result"
# The report's repair counters: their sum is how much the stage did at a call.
REPAIR_KEYS = (
    "synthetic_results_injected",
    "orphan_results_removed",
    "duplicate_tool_use_pruned",
    "results_relocated",
)


def synthetic_result(call_id: str, documented: bool = False) -> Message:
    text = SYNTHETIC_CONTENT_DOCUMENTED if documented else SYNTHETIC_CONTENT
    return Message.of(
        "tool", text, tool_call_id=call_id, is_error=True, error_code=SYNTHETIC_ERROR_CODE
    )


def _empty_report() -> dict[str, Any]:
    return {
        "synthetic_results_injected": 0,
        "orphan_results_removed": 0,
        "duplicate_tool_use_pruned": 0,
        "results_relocated": 0,
        "missing_tool_use_ids": [],
        "orphan_tool_result_ids": [],
        "has_repairs": False,
    }


def _same_shape(a: Message, b: Message) -> bool:
    return (a.role == b.role and a.tool_call_id == b.tool_call_id
            and [c.id for c in a.tool_calls] == [c.id for c in b.tool_calls])


def _resume_point(history: Sequence[Message], ctx: StageContext | None) -> int:
    """Where the prepass may start: the last block start of a previous history that passed,
    if `history` begins with the same shapes (microcompact only rewrites contents)."""
    if ctx is None or not ctx.memo or "valid" not in ctx.memo:
        return 0
    prev, start = ctx.memo["valid"]
    if len(history) < len(prev):
        return 0
    for i in changed_since(prev, history, ctx):
        if not _same_shape(prev[i], history[i]):
            return 0
    return start


def needs_repair(history: Sequence[Message], ctx: StageContext | None = None) -> bool:
    """ChatCLI's validation prepass: False iff every call block is complete and adjacent.
    With a `ctx` memo, it resumes from the last block or plain message of the previous history
    that passed."""
    i, n = _resume_point(history, ctx), len(history)
    block = i
    while i < n:
        m = history[i]
        if m.role == "tool":
            return True
        if not m.has_calls:
            # A full scan reaches every plain message at this point too, so it is as good a
            # place to resume as a block start: without it a chat-only history never moves
            # the resume point and every call rescans from 0 (issue 20 item 7).
            block = i
            i += 1
            continue
        block = i
        ids = [c.id for c in m.tool_calls]
        if "" in ids or len(set(ids)) != len(ids):
            return True
        idset, seen, j = set(ids), set(), i + 1
        while j < n and history[j].role == "tool":
            tid = history[j].tool_call_id
            if tid not in idset or tid in seen:
                return True
            seen.add(tid)
            j += 1
        if len(seen) != len(ids):
            return True
        i = j
    if ctx is not None and ctx.memo is not None:
        ctx.memo["valid"] = (frozen(history), block)
    return False


def _finish(history: Sequence[Message], out: list[Message], report: dict[str, Any]
            ) -> StageResult:
    report["has_repairs"] = any(report[k] > 0 for k in REPAIR_KEYS)
    if not report["has_repairs"]:
        return StageResult(frozen(history), report)
    return StageResult(tuple(out), report)


def repair_implemented(history: Sequence[Message], ctx: StageContext | None = None
                       ) -> StageResult:
    report = _empty_report()
    if not history or not needs_repair(history, ctx):
        return StageResult(frozen(history), report)
    out: list[Message] = []
    claimed: set[int] = set()
    n = len(history)
    for i, m in enumerate(history):
        if m.role == "tool":
            if i not in claimed:
                report["orphan_results_removed"] += 1
                report["orphan_tool_result_ids"].append(m.tool_call_id)
            continue
        if not m.has_calls:
            out.append(m)
            continue
        kept, ids = [], set()
        for call in m.tool_calls:
            if not call.id or call.id in ids:
                report["duplicate_tool_use_pruned"] += 1
                continue
            ids.add(call.id)
            kept.append(call)
        out.append(m if len(kept) == len(m.tool_calls) else _with_calls(m, kept))
        # Claim results up to the next assistant message; one interposed non-tool message
        # makes every later claim a relocation.
        claims: dict[str, tuple[int, bool]] = {}
        interposed = False
        j = i + 1
        while j < n and history[j].role != "assistant":
            t = history[j]
            if t.role != "tool":
                interposed = True
            elif t.tool_call_id and t.tool_call_id in ids and t.tool_call_id not in claims:
                claims[t.tool_call_id] = (j, interposed)
            j += 1
        for call in kept:
            if call.id in claims:
                j, relocated = claims[call.id]
                claimed.add(j)
                out.append(history[j])
                report["results_relocated"] += relocated
            else:
                out.append(synthetic_result(call.id))
                report["synthetic_results_injected"] += 1
                report["missing_tool_use_ids"].append(call.id)
    return _finish(history, out, report)


def _with_calls(m: Message, calls: list) -> Message:
    from dataclasses import replace

    return replace(m, tool_calls=tuple(calls))


def repair_documented(history: Sequence[Message]) -> StageResult:
    """Global id sets: calls deduplicated across the history, the first result after a call
    kept, every other result removed, a synthetic right after the assistant for each call
    without a result. Nothing is relocated or re-sorted."""
    report = _empty_report()
    declared: set[str] = set()
    answered: set[str] = set()
    kept_calls: dict[int, list] = {}
    drop: set[int] = set()
    for i, m in enumerate(history):
        if m.has_calls:
            kept = []
            for call in m.tool_calls:
                if not call.id or call.id in declared:
                    report["duplicate_tool_use_pruned"] += 1
                    continue
                declared.add(call.id)
                kept.append(call)
            kept_calls[i] = kept
        elif m.role == "tool":
            tid = m.tool_call_id
            if tid in declared and tid not in answered:
                answered.add(tid)
            else:
                drop.add(i)
                report["orphan_results_removed"] += 1
                report["orphan_tool_result_ids"].append(tid)
    out: list[Message] = []
    for i, m in enumerate(history):
        if i in drop:
            continue
        if i not in kept_calls:
            out.append(m)
            continue
        kept = kept_calls[i]
        out.append(m if len(kept) == len(m.tool_calls) else _with_calls(m, kept))
        for call in kept:
            if call.id not in answered:
                out.append(synthetic_result(call.id, documented=True))
                report["synthetic_results_injected"] += 1
                report["missing_tool_use_ids"].append(call.id)
    return _finish(history, out, report)


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Repair tool-call/result pairing.

    Invariant (implemented): afterwards every assistant call is followed by exactly one result
    before any other message, and no tool message lacks its call; a second run is a no-op.
    Invariant (documented): every call has exactly one result somewhere after it.
    """
    if ctx.documented:
        return repair_documented(history)
    return repair_implemented(history, ctx)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return sum(report.get(k, 0) for k in REPAIR_KEYS)


def describe(report: Mapping[str, Any]) -> str:
    if not report.get("has_repairs") and not any(report.get(k) for k in REPAIR_KEYS):
        return "No repair needed."
    parts = [f"{report.get(k, 0)} {k.replace('_', ' ')}" for k in REPAIR_KEYS if report.get(k)]
    return "Repaired: " + ", ".join(parts) + "."


def quiet_note(facts: ReplayFacts) -> str | None:
    if sum(facts.total(k) for k in REPAIR_KEYS):
        return None
    return "Pairing never repaired anything: every call had its result in place."
