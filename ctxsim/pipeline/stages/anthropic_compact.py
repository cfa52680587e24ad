"""Anthropic's server-side compaction `compact_20260112` (SPEC-agents §2.5.8), with the fold.

When the input exceeds the trigger, the server summarizes the whole conversation into a
compaction block and answers from it; the client sends the response back, so every later
request starts at that block ("the API automatically drops all message blocks prior to the
compaction block"). The block is its own assistant message, just before the response that
carried it; the fold reconstructs which earlier responses carried one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    COMPACTION_EVENTS,
    compaction_event,
    fold,
    full_prompt,
    leading_system_len,
    placeholder_message,
    placeholder_text,
)
from ..messages import Message
from ..token_model import after_fields, compared, shown_after, step_call, unit_of
from . import ReplayFacts, StageContext, StageResult, view_result

STAGE = "anthropic_compact"
BLOCK_KIND = "compaction_block"


@dataclass(frozen=True)
class Block:
    position: int  # index in the history of the response that carried the block
    message: Message
    source: str  # "recorded" | "placeholder"


def view(p: Sequence[Message], b: Block | None) -> list[Message]:
    if b is None:
        return list(p)
    lead = leading_system_len(p)
    return [*p[:lead], b.message, *p[b.position:]]


def recorded_block(m: Message) -> str | None:
    """The summary of a response's recorded compaction block; None when absent or failed."""
    marker = m.meta.get("anthropic_compaction")
    if isinstance(marker, Mapping) and isinstance(marker.get("content"), str):
        return marker["content"]
    return None


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Compact when the input is over the trigger; later calls start at the block.

    Invariant: the output is either the input's view unchanged or the leading system block
    plus one compaction message; a recorded block with null content changes nothing.
    """
    p = ctx.params
    trigger = (p.get("compact_trigger") or {"value": 150000})["value"]
    mode = p.get("anthropic_compact_mode", "predict")

    def step(b: Block | None, h: Sequence[Message], end: int,
             j: int) -> tuple[Block | None, list[Message], dict[str, Any]]:
        prefix = h[:end]
        before = view(prefix, b)
        tokens = compared(ctx, full_prompt(before, ctx), len(before), step_call(ctx, h, end, j),
                          view=before)
        fires = tokens > trigger
        response = h[end] if end < len(h) else None
        recorded = recorded_block(response) if response is not None else None
        # The report names the source of the block the view starts at, also at the calls
        # after the one that compacted.
        info: dict[str, Any] = {"tokens_before": tokens, "fires": fires, "applied": False,
                                "summary_source": b.source if b is not None else None,
                                "recorded": recorded is not None, "before": before,
                                "summary": None}
        text: str | None = None
        source = "placeholder"
        if recorded is not None and (mode == "recorded" or fires):
            text, source = recorded, "recorded"
        elif mode == "predict" and fires:
            items = len(before) - leading_system_len(before)
            text = placeholder_text(STAGE, items, tokens, j,
                                    p.get("summary_placeholder_tokens", 2000), ctx.counter)
            source = "placeholder"
        if text is None:
            return b, before, info
        block = placeholder_message("assistant", text, BLOCK_KIND)
        info.update(applied=True, summary_source=source, summary=text)
        out = [*prefix[:leading_system_len(prefix)], block]
        return (Block(end, block, source) if response is not None else b), out, info

    result = fold(history, ctx, None, step, reuse_current=False)
    info = result.info
    out = result.view
    after = full_prompt(out, ctx)
    kept = {id(m) for m in out}
    events = []
    if info["applied"]:
        events.append(compaction_event(STAGE, "predicted", "input_tokens", "placeholder",
                                       info["tokens_before"], after))
    last = result.previous_info
    if last is not None and last["recorded"]:
        # The response of the previous call carried a block: learnt only now.
        kind = ("recorded" if mode == "recorded" or last["fires"] else "recorded_not_predicted")
        events.append(compaction_event(STAGE, kind, "input_tokens",
                                       "recorded" if kind == "recorded" else None,
                                       last["tokens_before"], None, call_index=result.call - 1))
    report: dict[str, Any] = {
        "applied": info["applied"],
        "summary_source": info["summary_source"],
        "tokens_before": info["tokens_before"],
        "tokens_after": after,
        "dropped_messages": sum(1 for m in info["before"] if id(m) not in kept),
        "iterations": ([{"type": "compaction", "input_tokens": info["tokens_before"],
                         "output_tokens": ctx.counter.count(info["summary"].encode("utf-8"))}]
                       if info["applied"] else []),
        "paused": bool(info["applied"] and p.get("compact_pause_after_compaction")),
        "trigger": {"type": "input_tokens", "value": trigger},
        "instructions": p.get("compact_instructions"),
        "token_source": "anchored", "token_unit": unit_of(ctx, "anchored"),
        **after_fields(ctx, unit_of(ctx, "anchored"), after, len(out)),
        COMPACTION_EVENTS: events,
    }
    h = tuple(history)
    return view_result(h, out, report)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("applied") else 0


def describe(report: Mapping[str, Any]) -> str:
    if report.get("applied"):
        return (f"Compacted ({report.get('summary_source')} summary): "
                f"{report.get('tokens_before')} → {shown_after(report)} tokens, "
                f"{report.get('dropped_messages')} message(s) dropped.")
    start = (f"; starts at a {report['summary_source']} compaction block"
             if report.get("summary_source") else "")
    return f"{report.get('tokens_before')} tokens, not over the trigger{start}."


def quiet_note(facts: ReplayFacts) -> str | None:
    if any(activity(r) for r in facts.reports) or any(
            r.get("summary_source") for r in facts.reports):
        return None
    trigger = facts.value("compact_trigger") or {}
    return (f"Anthropic compaction never fired: no input was over the trigger of "
            f"{trigger.get('value'):,} tokens.")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    return "compaction trigger", (values.get("compact_trigger") or {}).get("value")
