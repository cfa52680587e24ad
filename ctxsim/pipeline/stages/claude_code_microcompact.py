"""Claude Code's clearing of old tool results (SPEC-agents §2.5.2), on the persistent history.

Users observe old results replaced by `[Old tool result content cleared]` with no notice
(anthropics/claude-code#42542); Anthropic documents neither trigger nor count, so the trigger
(an idle gap by default, a result count, or the transcript's own `microcompact_boundary`
markers) and the number of results kept are parameters with ctxsim's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..agents_common import cc_rough, recorded_markers, text_of, u16len
from ..history import frozen
from ..messages import Message
from ..tokens import history_tokens
from . import ReplayFacts, StageContext, StageResult, changed_since
from ._ownership import result_owners

IMAGE_ESTIMATE = 2000


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 timestamp (`Z` or an offset); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def idle_gap(h: Sequence[Message]) -> float | None:
    """Minutes from the last assistant message to the newest timestamp after it."""
    last = next((i for i in range(len(h) - 1, -1, -1) if h[i].role == "assistant"), None)
    if last is None:
        return None
    t_last = parse_time(h[last].meta.get("timestamp"))
    t_now = next((t for m in reversed(h[last + 1:])
                  if (t := parse_time(m.meta.get("timestamp"))) is not None), None)
    if t_last is None or t_now is None:
        return None
    return (t_now - t_last).total_seconds() / 60


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Clear all but the most recent results of the listed tools when the trigger fires.

    Invariant: no message is added, removed or moved; only tool messages answering a cleared
    call change, and a cleared result stays exactly the placeholder.
    """
    p = ctx.params
    h = frozen(history)
    trigger = p.get("cc_microcompact_trigger", "time")
    placeholder = p.get("cc_microcompact_placeholder", "")
    tools = set(p.get("cc_microcompact_tools") or ())
    ids = _listed_ids(h, ctx, tools)
    keep_n = max(1, p.get("cc_microcompact_keep_recent", 5))
    keep: list[str] = ids[-keep_n:]
    clear: list[str] | None = None  # ids[:-keep_n], copied only when the trigger fires
    report: dict[str, Any] = {
        "applied": False, "trigger": None, "gap_minutes": None, "cleared_tool_ids": [],
        "kept_tool_ids": [], "tokens_saved_estimate": 0, "cleared_tokens": 0, "reason": None,
    }
    fired = False
    if trigger == "time":
        gap = idle_gap(h)
        report["gap_minutes"] = gap
        if gap is None:
            report["reason"] = "no_timestamps"
        elif gap < p.get("cc_microcompact_gap_minutes", 60):
            report["reason"] = "gap_below_threshold"
        else:
            fired = True
    elif trigger == "count":
        placeholder_bytes = placeholder.encode("utf-8", "surrogatepass")
        live = {m.tool_call_id for m in h if m.role == "tool" and m.content != placeholder_bytes}
        fired = sum(1 for i in ids if i in live) > p.get("cc_microcompact_count_trigger", 12)
        if not fired:
            report["reason"] = "count_below_threshold"
    elif trigger == "recorded":
        current = ctx_call(h)
        markers = [mk for _, call, mk in recorded_markers(h, "microcompaction") if call == current]
        if markers:
            fired = True
            listed: list[str] = []
            for mk in markers:
                listed += [i for i in mk.get("compacted_tool_ids") or () if i not in listed]
            clear = listed
            keep = [i for i in ids if i not in listed]
        else:
            report["reason"] = "no_recorded_marker"
    else:
        report["reason"] = "off"
    if not fired:
        return StageResult(h, report)
    if clear is None:
        clear = ids[:-keep_n]
    report["trigger"] = trigger
    report["kept_tool_ids"] = list(keep)
    target = placeholder.encode("utf-8", "surrogatepass")
    clearing = set(clear)
    owners = result_owners(h)  # a result without a call is never touched
    out = list(h)
    changed: list[int] = []
    cleared_ids: list[str] = []
    estimate = 0
    for i, m in enumerate(h):
        if m.role != "tool" or m.tool_call_id not in clearing or owners.get(i) is None or (
            m.content == target and not m.meta.get("binary_parts")
        ):
            continue
        parts = m.meta.get("binary_parts") or ()
        estimate += cc_rough(u16len(text_of(m))) + IMAGE_ESTIMATE * len(parts)
        meta = m.meta
        if parts:
            meta = MappingProxyType({k: v for k, v in m.meta.items() if k != "binary_parts"})
        out[i] = replace(m, content=target, meta=meta)
        changed.append(i)
        if m.tool_call_id not in cleared_ids:
            cleared_ids.append(m.tool_call_id)
    if not changed:
        report["reason"] = "nothing_to_clear"
        report["trigger"] = None
        return StageResult(h, report)
    new = tuple(out)
    report.update(applied=True, cleared_tool_ids=[i for i in clear if i in cleared_ids],
                  tokens_saved_estimate=estimate,
                  cleared_tokens=history_tokens(h, ctx.counter) - history_tokens(new, ctx.counter))
    return StageResult(new, report, tuple(changed))


def _listed_ids(h: Sequence[Message], ctx: StageContext, tools: set[str]) -> list[str]:
    """The ids of the calls to `tools`, in history order. With a memo, the previous call's
    list is extended by the appended messages (this runs at every call of a long session);
    a change at an assistant message's position rebuilds it. The list is the memo's own."""
    memo = ctx.memo
    previous = memo.get("listed_ids") if memo is not None else None
    found: list[str] | None = None
    start = 0
    if previous is not None and previous[1] == tools:
        before, _, kept, counts = previous
        n = min(len(before), len(h))
        if not any(before[i].role == "assistant" or h[i].role == "assistant"
                   for i in changed_since(before, h, ctx)):
            found, start = kept, n
            # Forget what came from the positions past the shorter length.
            del found[sum(counts[:n]) if len(counts) > n else len(found):]
            del counts[n:]
    if found is None:
        found, counts = [], []
    for i in range(start, len(h)):
        m = h[i]
        listed = [c.id for c in m.tool_calls if c.name in tools] if m.role == "assistant" else []
        found.extend(listed)
        counts.append(len(listed))
    if memo is not None:
        memo["listed_ids"] = (h, tools, found, counts)
    return found


def ctx_call(h: Sequence[Message]) -> int:
    """The call this history is sent at: one per assistant message before it."""
    return sum(1 for m in h if m.role == "assistant")


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return len(report.get("cleared_tool_ids") or ()) if report.get("applied") else 0


def describe(report: Mapping[str, Any]) -> str:
    if not report.get("applied"):
        gap = report.get("gap_minutes")
        since = f" (idle {gap:.1f} min)" if isinstance(gap, float) else ""
        return f"Nothing cleared: {(report.get('reason') or 'off').replace('_', ' ')}{since}."
    return (f"Cleared {len(report.get('cleared_tool_ids') or ())} old result(s) "
            f"({report.get('trigger')} trigger), kept {len(report.get('kept_tool_ids') or ())}; "
            f"{report.get('cleared_tokens', 0)} tokens saved.")


def quiet_note(facts: ReplayFacts) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    trigger = facts.value("cc_microcompact_trigger")
    if trigger == "time":
        return (f"Claude Code microcompact never cleared a result: no idle gap reached "
                f"{facts.value('cc_microcompact_gap_minutes')} minutes between an answer and "
                "the next message (or the transcript has no timestamps). The trigger and the "
                "gap are ctxsim's defaults; not documented by Anthropic.")
    if trigger == "recorded":
        return "Claude Code microcompact: the transcript records no microcompaction."
    return f"Claude Code microcompact never cleared a result (trigger {trigger})."
