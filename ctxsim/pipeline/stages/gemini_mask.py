"""Gemini CLI's tool-output masking before every call (SPEC-agents-2 §1.3), persistent.

Newest to oldest (the latest turn skipped when protected), tool outputs add up until they
pass `protectionThresholdTokens`; that one and every older output are prunable. When the
prunable outputs total at least `minPrunableThresholdTokens`, each becomes a
`<tool_output_masked>` preview naming the file the full output went to, if that is smaller.
Masked outputs are never counted again, so the history the client keeps stays masked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from . import StageContext, StageResult
from ._agents2 import Sums, era_values, text
from ._gemini import ERAS, EXEMPT_TOOLS, MASK_TAG, SHELL_TOOL, output_file, response_tokens

SECTION = re.compile(r"^(Output|Error|Exit Code|Signal|Background PIDs|Process Group PGID): ",
                     re.M)


def simple_preview(content: str) -> str:
    lines = content.split("\n")
    if len(lines) <= 20:
        return content
    return ("\n".join(lines[:10]) + f"\n\n... [{len(lines) - 20} lines omitted] ...\n\n"
            + "\n".join(lines[-10:]))


def shell_preview(content: str) -> str:
    """formatShellPreview: the `Output:` section as head 10 + tail 10 lines, the other
    sections whole."""
    parts = SECTION.split(content)
    if len(parts) < 3:
        return simple_preview(content)
    out = [simple_preview(parts[0].strip())] if parts[0].strip() else []
    for k in range(1, len(parts), 2):
        name, body = parts[k], (parts[k + 1] if k + 1 < len(parts) else "").strip()
        out.append(f"Output: {simple_preview(body)}" if name == "Output" else f"{name}: {body}")
    return "\n".join(out)


def masked_text(content: str, tool: str, file: str) -> str:
    if tool == SHELL_TOOL:
        preview = shell_preview(content)
    elif len(content) > 500:
        preview = f"{content[:250]}\n... [TRUNCATED] ...\n{content[-250:]}"
    else:
        preview = content
    return (f"<{MASK_TAG}>\n{preview}\n\nOutput too large. Full output available at: {file}\n"
            f"</{MASK_TAG}>")


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Mask old tool outputs as Gemini CLI would.

    Invariant: only tool messages change, each at most once (a masked one carries the tag and
    is skipped from then on); nothing changes unless the prunable total reaches the minimum."""
    p = ctx.params
    values, era = era_values(ctx, ERAS, "gemini_version")
    report: dict[str, Any] = {"masked": 0, "prunable_tokens": 0, "tokens_saved": 0,
                              "era": era.label, "enabled": bool(values["gemini_mask_enabled"])}
    if not values["gemini_mask_enabled"]:
        return StageResult(history, report, ())
    protect = p.get("gemini_mask_protect_tokens", 50000)
    minimum = p.get("gemini_mask_min_prunable_tokens", 30000)
    end = len(history)
    if p.get("gemini_mask_protect_latest_turn", True):
        while end > 0 and history[end - 1].role != "assistant":
            end -= 1  # the latest content: the results (or prompt) after the last answer
    memo = ctx.memo if ctx.memo is not None else {}
    # Call ids → tool names, grown as the history grows (ids are unique; never removed).
    names: dict[str, str] = memo.setdefault("names", {})

    def figure(h: Sequence[Message], i: int) -> int:
        """A message's countable tool tokens: 0 unless an unmasked, non-exempt result."""
        m = h[i]
        if m.role == "assistant":
            names.update((c.id, c.name) for c in m.tool_calls)
            return 0
        name = names.get(m.tool_call_id, "")
        if m.role != "tool" or name in EXEMPT_TOOLS or MASK_TAG.encode() in m.content:
            return 0
        return response_tokens(m, name)

    sums = Sums(history, ctx, "mask_sums", figure).sums
    # Newest first, past the protected window: the part that crosses it is the first
    # prunable one; every older figure is prunable too (their sum is a prefix sum).
    running, i, crossing = 0, end, None
    while i > 0 and sums[end] > protect:  # (under the window in all: nothing to walk)
        i -= 1
        running += sums[i + 1] - sums[i]
        if running > protect:
            crossing = i
            break
    prunable: list[tuple[int, int, str]] = []
    if crossing is not None and sums[crossing + 1] >= minimum:
        prunable = [(k, sums[k + 1] - sums[k], history[k].tool_call_id)
                    for k in range(crossing, -1, -1) if sums[k + 1] > sums[k]]
    elif crossing is not None:
        report["prunable_tokens"] = sums[crossing + 1]
        return StageResult(history, report, ())
    total = sum(t for _, t, _ in prunable)
    report["prunable_tokens"] = total
    if not prunable or total < minimum:
        return StageResult(history, report, ())
    session = ctx.session if isinstance(ctx.session, Mapping) else {}
    out = list(history)
    changed = []
    for i, tokens, call_id in prunable:
        tool = names.get(call_id, "")
        m = history[i]
        masked = m.with_content(masked_text(text(m), tool, output_file(
            session, tool, call_id)).encode("utf-8", "surrogatepass"))
        saved = tokens - response_tokens(masked, tool)
        if saved > 0:
            out[i] = masked
            changed.append(i)
            report["tokens_saved"] += saved
    report["masked"] = len(changed)
    if not changed:
        return StageResult(history, report, ())
    return StageResult(tuple(out), report, tuple(sorted(changed)))


def activity(report: Mapping[str, Any]) -> int:
    return int(report.get("masked") or 0)


def describe(report: Mapping[str, Any]) -> str:
    if not report.get("enabled", True):
        return "Tool-output masking is off in this Gemini CLI version."
    if report.get("masked"):
        return (f"Masked {report['masked']} old tool outputs (~{report['tokens_saved']:,} "
                "tokens saved).")
    return f"Nothing masked: {report.get('prunable_tokens', 0):,} prunable tokens."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    return ("Gemini CLI's tool-output masking never fired: beyond the newest "
            f"{facts.value('gemini_mask_protect_tokens'):,} tokens of tool output there were "
            f"never {facts.value('gemini_mask_min_prunable_tokens'):,} tokens to mask.")
