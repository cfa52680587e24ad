"""Budget enforcement with spill to disk (behaviour file §3; SPEC §2.2 row 9 documented).

Pass 1 spills every result over the per-result limit; pass 2 cuts each assistant group over the
per-group budget, largest results first. In ChatCLI it runs on the outgoing copy, so the same
result is spilled again (under a new counter) at every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message
from ..spill import SpillError, clean_join
from . import StageContext, StageResult, Units, from_units, lit, to_units

PREVIEW_HEAD = 4000
PREVIEW_TAIL = 1000
PASS2_FLOOR = PREVIEW_HEAD + PREVIEW_TAIL + 200


def groups(history: Sequence[Message]) -> list[list[int]]:
    """Indices of tool messages per assistant tool-call group (behaviour file §3.2)."""
    out: list[list[int]] = []
    current: list[int] | None = None
    for i, m in enumerate(history):
        if m.role == "assistant":
            current = [] if m.tool_calls else None
            if current is not None:
                out.append(current)
        elif m.role == "tool":
            if current is not None:
                current.append(i)
        elif m.role in ("user", "system"):
            current = None
    return out


def spill_preview(content: Units, path: str, documented: bool) -> Units:
    """The preview left in the context after a successful spill."""
    n = len(content)
    nl = lit("\n", content)
    head_end = min(PREVIEW_HEAD, n)
    head = content[:head_end]
    k = head.rfind(nl)
    if documented:
        if k >= 0:
            head = head[: k + 1]
    elif k > head_end // 2:
        head = head[: k + 1]
    tail = content[:0]
    tail_start = max(n - PREVIEW_TAIL, 0)
    if tail_start > head_end:
        tail = content[tail_start:]
        k = tail.find(nl)
        if (documented and k >= 0) or (not documented and 0 < k < len(tail) // 2):
            tail = tail[k + 1:]
    # ChatCLI computes the omitted count from the constants, ignoring what was kept.
    omitted = n - len(head) - len(tail) if documented else n - PREVIEW_HEAD - PREVIEW_TAIL
    marker = f"\n\n... [{omitted} chars omitted — full output saved to {path}]\n\n"
    return head + lit(marker, content) + tail


def truncate_with_disk_persist(
    content: Units, call_id: str, limit: int, ctx: StageContext
) -> tuple[Units, str | None]:
    """`truncateWithDiskPersist`: spill the full content and return (preview, file name)."""
    if len(content) <= limit:
        return content, None
    spills = ctx.spills
    directory = ctx.params["spill_dir"]
    try:
        spills.ensure_dir(directory)
    except SpillError:
        fallback = lit("\n... [output truncated — dir creation failed]", content)
        return content[:limit] + fallback, None
    # The counter is taken before the write, so a failed write still consumes a number.
    number = spills.next_number()
    name = f"budget_{call_id.replace('/', '_')}_{number}.txt"
    path = clean_join(directory, name)
    try:
        spills.write(directory, name, path, from_units(content), ctx.call_index)
    except SpillError:
        return content[:limit] + lit("\n... [output truncated — disk write failed]", content), None
    return spill_preview(content, path, ctx.documented), name


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Enforce the per-result limit, then the per-group budget.

    Invariant: only grouped tool messages change; every spilled file holds the full content the
    result had just before it was cut.
    """
    documented = ctx.documented
    per_result = ctx.env("per_result_max_chars")
    budget = ctx.env("turn_budget_chars")
    report: dict[str, Any] = {
        "total_tool_results": 0,
        "total_original_chars": 0,
        "total_final_chars": 0,
        "results_truncated": 0,
        "results_persisted_disk": 0,
        "bytes_saved_to_disk": 0,
        "spilled_files": [],
    }
    if not history:
        return StageResult(tuple(history), report)
    grouped = groups(history)
    units: dict[int, Units] = {}
    changed: set[int] = set()

    def current(i: int) -> Units:
        if i not in units:
            units[i] = to_units(history[i].content, documented)
        return units[i]

    def cut(i: int, limit: int) -> Units:
        new, name = truncate_with_disk_persist(current(i), history[i].tool_call_id, limit, ctx)
        units[i] = new
        changed.add(i)
        report["results_truncated"] += 1
        report["results_persisted_disk"] += 1
        if name:
            report["spilled_files"].append(name)
        return new

    lengths: dict[int, int] = {}
    for group in grouped:
        for i in group:
            n = len(history[i].content) if not documented else len(current(i))
            report["total_tool_results"] += 1
            report["total_original_chars"] += n
            lengths[i] = n
            # Pass 1 saves nothing in the report: ChatCLI measures after replacing.
            if n > per_result:
                lengths[i] = len(cut(i, per_result))
    for group in grouped:
        size = sum(lengths[i] for i in group)
        if size <= budget:
            continue
        for i in sorted(group, key=lambda j: -lengths[j]):
            if size <= budget:
                break
            n = lengths[i]
            target = max(n - (size - budget), PASS2_FLOOR)
            if target >= n:
                continue
            lengths[i] = len(cut(i, target))
            size -= n - lengths[i]
            report["bytes_saved_to_disk"] += n - lengths[i]
    report["total_final_chars"] = sum(lengths.values())
    if not changed:
        return StageResult(tuple(history), report)
    out = list(history)
    for i in changed:
        out[i] = history[i].with_content(from_units(units[i]))
    return StageResult(tuple(out), report)
