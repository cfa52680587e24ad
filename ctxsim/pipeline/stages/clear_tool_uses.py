"""Anthropic context editing `clear_tool_uses_20250919` (SPEC §2.4), server-side, per call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..messages import Message
from ..token_model import compared, unit_of
from ..tokens import full_prompt_tokens
from . import ReplayFacts, StageContext, StageResult
from ._ownership import result_owners


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Clear the results of all but the K most recent tool uses when the trigger fires.

    Invariant: no message is added, removed or moved; excluded tools' results and results
    without a call are never touched; below `clear_at_least` nothing changes.
    """
    p = ctx.params
    counter = ctx.counter

    def prompt(h: Sequence[Message]) -> int:
        return full_prompt_tokens(h, counter, "", ctx.tools, ctx.response_schema)

    report: dict[str, Any] = {
        "applied": False,
        "cleared_tool_uses": 0,
        "cleared_tool_inputs": 0,
        "cleared_input_tokens": 0,
    }
    calls = [(i, k, c) for i, m in enumerate(history) if m.role == "assistant"
             for k, c in enumerate(m.tool_calls)]
    trigger = p.get("trigger") or {"type": "input_tokens", "value": 100000}
    before = prompt(history)
    if trigger["type"] == "tool_uses":
        fired = len(calls) > trigger["value"]
    else:
        # The API counts its own tokens: the provider's where the session has a bill.
        report.update(token_source="anchored", token_unit=unit_of(ctx, "anchored"),
                      tokens_before=compared(ctx, before, len(history)))
        fired = report["tokens_before"] > trigger["value"]
    if not fired:
        return StageResult(tuple(history), report)
    keep = (p.get("keep") or {"value": 3})["value"]
    older = calls[: max(len(calls) - keep, 0)]
    excluded = set(p.get("exclude_tools") or ())
    results: dict[tuple[int, str], list[int]] = {}
    for j, owner in result_owners(history).items():
        if owner is not None:
            results.setdefault((owner, history[j].tool_call_id), []).append(j)
    placeholder = (p.get("placeholder") or "").encode("utf-8", "surrogatepass")
    clear_inputs = p.get("clear_tool_inputs", False)
    out = list(history)
    cleared_calls: dict[int, set[int]] = {}
    cleared = inputs = 0
    for i, k, call in older:
        if call.name in excluded or not results.get((i, call.id)):
            continue
        for j in results[(i, call.id)]:
            out[j] = out[j].with_content(placeholder)
        cleared += 1
        if clear_inputs is True or (
            not isinstance(clear_inputs, bool) and call.name in clear_inputs
        ):
            cleared_calls.setdefault(i, set()).add(k)
            inputs += 1
    for i, positions in cleared_calls.items():
        m = out[i]
        calls_i = tuple(
            replace(c, arguments="{}") if k in positions else c for k, c in enumerate(m.tool_calls)
        )
        out[i] = replace(m, tool_calls=calls_i)
    if not cleared:
        return StageResult(tuple(history), report)
    after = prompt(out)
    at_least = p.get("clear_at_least")
    if at_least and before - after < at_least["value"]:
        return StageResult(tuple(history), report)
    report.update(
        applied=True,
        cleared_tool_uses=cleared,
        cleared_tool_inputs=inputs,
        cleared_input_tokens=before - after,
    )
    return StageResult(tuple(out), report)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("applied") else 0


def describe(report: Mapping[str, Any]) -> str:
    if not report.get("applied"):
        return "Not applied."
    return (f"Cleared {report.get('cleared_tool_uses', 0)} tool result(s) "
            f"({report.get('cleared_input_tokens', 0)} tokens); "
            f"{report.get('cleared_tool_inputs', 0)} input(s) cleared.")


def quiet_note(facts: ReplayFacts) -> str | None:
    if facts.total("cleared_tool_uses"):
        return None
    trigger = facts.value("trigger") or {}
    return (f"Clear tool uses never cleared anything: the trigger ({trigger.get('type')} > "
            f"{trigger.get('value')}) never fired, or nothing older than the kept tool uses "
            "was clearable.")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    """The chart's limit line: the trigger, when it counts input tokens."""
    trigger = values.get("trigger") or {}
    return "clear trigger", trigger.get("value") if trigger.get("type") == "input_tokens" else None
