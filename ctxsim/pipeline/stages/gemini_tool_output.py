"""Gemini CLI's tool-output truncation when a tool finishes (SPEC-agents-2 §1.2), dispatch.

The shell tool's output and an MCP tool's single text result longer than
`T = min(4 × (token limit − last prompt tokens), truncateToolOutputThreshold)` UTF-16 units
keep 20 % head and 80 % tail of T around a notice naming the saved file (≥ v0.29); before,
a shell output over 4,000,000 characters kept its last 1,000 lines. The last prompt's tokens
are the latest assistant message's recorded usage (0 when none is recorded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from . import StageContext, StageResult
from ._agents2 import era_values, recorded_usage, replace_last, text, truncation_activity
from ._gemini import (
    ERAS,
    SHELL_TOOL,
    is_mcp,
    last_lines_output,
    output_file,
    token_limit,
    tool_names,
    truncated_output,
)


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Truncate the entering tool message as Gemini CLI would.

    Invariant: only the last message may change; an output within the limit, or of a tool
    Gemini does not truncate, is returned unchanged (the same object); an output that already
    carries Gemini's notice is left as it is (the transcript recorded it truncated)."""
    m = history[-1]
    values, era = era_values(ctx, ERAS, "gemini_version")
    session = ctx.session if isinstance(ctx.session, Mapping) else {}
    tool = tool_names(history[:-1]).get(m.tool_call_id, "")
    limit = token_limit(ctx.params, session)
    last = recorded_usage(history[0]) if history and history[0].role == "assistant" else None
    last_prompt = int(last["total_input"]) if last else 0
    threshold = values["gemini_truncate_threshold"]
    mode = values["gemini_truncate_mode"]
    content = text(m)
    report: dict[str, Any] = {"tool": tool, "era": era.label, "truncated": False,
                              "chars_before": len(content), "chars_after": len(content)}
    eligible = tool == SHELL_TOOL or (mode == "head_tail" and is_mcp(tool))
    if not eligible or threshold <= 0 or content.startswith("Output too large."):
        return StageResult(history, report, ())
    if mode == "last_lines":
        if len(content) <= threshold:
            return StageResult(history, report, ())
        after = last_lines_output(content, values.get("gemini_truncate_lines", 1000))
    else:
        cap = min(4 * max(limit - last_prompt, 0), threshold)
        report["limit_chars"] = cap
        after = truncated_output(content, output_file(session, tool, m.tool_call_id), cap)
        if after == content:
            return StageResult(history, report, ())
    report.update(truncated=True, chars_after=len(after))
    return replace_last(history, after, report)


activity = truncation_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("truncated"):
        return (f"{report.get('tool')} output truncated: {report.get('chars_before'):,} → "
                f"{report.get('chars_after'):,} characters.")
    return f"{report.get('tool') or 'tool'} output kept ({report.get('chars_before'):,} chars)."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    return ("Gemini CLI's tool-output truncation never fired: no shell or MCP output was over "
            f"{facts.value('gemini_truncate_threshold'):,} characters.")
