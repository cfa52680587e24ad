"""Budget enforcement with spill to disk (behaviour file §3; SPEC §2.2 row 9 documented).

Pass 1 spills every result over the per-result limit; pass 2 cuts each assistant group over the
per-group budget, largest results first. In ChatCLI it runs on the outgoing copy, so the same
result is spilled again (under a new counter) at every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..history import frozen, with_changes
from ..messages import Message
from ..spill import SpillError, clean_join
from . import (
    ReplayFacts,
    StageContext,
    StageResult,
    Units,
    changed_since,
    from_units,
    lit,
    to_units,
)

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


def spill_preview[U: (bytes, str)](content: U, path: str, documented: bool) -> U:
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


@overload
def truncate_with_disk_persist(
    content: bytes, call_id: str, limit: int, ctx: StageContext
) -> tuple[bytes, str | None]: ...
@overload
def truncate_with_disk_persist(
    content: str, call_id: str, limit: int, ctx: StageContext
) -> tuple[str, str | None]: ...
def truncate_with_disk_persist[U: (bytes, str)](
    content: U, call_id: str, limit: int, ctx: StageContext
) -> tuple[U, str | None]:
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
        spills.write(directory, name, path, spills.data_of(content, from_units),
                     ctx.call_index)
    except SpillError:
        return content[:limit] + lit("\n... [output truncated — disk write failed]", content), None
    return spill_preview(content, path, ctx.documented), name


@dataclass
class _GroupIndex:
    """The groups of a history with each group's size and largest result, kept between calls:
    the next call's history shares its prefix, so only changed and appended messages are
    measured again. `total` and `busy` (the groups over a limit) follow every update, so a
    call costs what changed, not the length of the history."""

    per_result: int
    budget: int
    source: Sequence[Message] = ()
    resume: int = 0  # where a re-walk starts: the last group's assistant (or the end)
    starts: list[int] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    sums: list[int] = field(default_factory=list)
    maxes: list[int] = field(default_factory=list)
    lens: dict[int, int] = field(default_factory=dict)  # tool index -> length, grouped only
    owner: dict[int, int] = field(default_factory=dict)  # tool index -> group number
    total: int = 0
    busy: set[int] = field(default_factory=set)

    def open(self, start: int) -> int:
        self.starts.append(start)
        self.members.append([])
        self.sums.append(0)
        self.maxes.append(0)
        return len(self.starts) - 1

    def add(self, k: int, i: int, n: int) -> None:
        self.members[k].append(i)
        self.lens[i] = n
        self.owner[i] = k
        self.sums[k] += n
        self.total += n
        if n > self.maxes[k]:
            self.maxes[k] = n
        self._flag(k)

    def resize(self, i: int, n: int) -> int:
        """A grouped result now measures `n`; returns its group (re-`measure` it after)."""
        self.total += n - self.lens[i]
        self.lens[i] = n
        return self.owner[i]

    def measure(self, k: int) -> None:
        sizes = [self.lens[i] for i in self.members[k]]
        self.sums[k] = sum(sizes)
        self.maxes[k] = max(sizes, default=0)
        self._flag(k)

    def _flag(self, k: int) -> None:
        if self.maxes[k] > self.per_result or self.sums[k] > self.budget:
            self.busy.add(k)
        else:
            self.busy.discard(k)

    def truncate(self, pos: int) -> None:
        """Forget groups starting at or after `pos` (they are walked again)."""
        while self.starts and self.starts[-1] >= pos:
            self.starts.pop()
            self.busy.discard(len(self.starts))
            for i in self.members.pop():
                self.total -= self.lens.pop(i)
                del self.owner[i]
            self.sums.pop()
            self.maxes.pop()


def _same_kind(a: Message, b: Message) -> bool:
    return a.role == b.role and bool(a.tool_calls) == bool(b.tool_calls)


def _index(history: Sequence[Message], ctx: StageContext, per_result: int, budget: int
           ) -> _GroupIndex:
    documented = ctx.documented
    memo = ctx.memo
    idx: _GroupIndex | None = memo.get("groups") if memo is not None else None
    start = 0
    if idx is not None and (len(history) < idx.resume
                            or (idx.per_result, idx.budget) != (per_result, budget)):
        idx = None  # not an extension of the previous history: start over
    if idx is not None:
        dirty: set[int] = set()
        for i in changed_since(idx.source, history, ctx, below=idx.resume):
            old, new = idx.source[i], history[i]
            if not _same_kind(old, new):
                idx = None
                break
            if i in idx.owner:
                dirty.add(idx.resize(i, _length(new, documented)))
        if idx is not None:
            for k in dirty:
                idx.measure(k)
            start = idx.resume
            idx.truncate(start)
    if idx is None:
        idx, start = _GroupIndex(per_result, budget), 0
    # Walk from `start` (a group's assistant, or a point with no group open) to the end.
    current: int | None = None
    for i in range(start, len(history)):
        m = history[i]
        role = m.role
        if role == "assistant":
            current = idx.open(i) if m.tool_calls else None
        elif role == "tool":
            if current is not None:
                idx.add(current, i, _length(m, documented))
        elif role in ("user", "system"):
            current = None
    idx.source = frozen(history)
    idx.resume = idx.starts[-1] if idx.starts else len(history)
    if memo is not None:
        memo["groups"] = idx
    return idx


def _length(m: Message, documented: bool) -> int:
    return len(m.content) if not documented else len(to_units(m.content, True))


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Enforce the per-result limit, then the per-group budget.

    Invariant: only grouped tool messages change; every spilled file holds the full content the
    result had just before it was cut. Groups under both limits are not even looked at: they
    cannot change, so spill numbering is the same as a full pass.
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
    history = frozen(history)
    if not history:
        return StageResult(history, report)
    idx = _index(history, ctx, per_result, budget)
    report["total_tool_results"] = len(idx.lens)
    report["total_original_chars"] = total = idx.total
    busy = sorted(idx.busy)
    units: dict[int, Units] = {}
    lengths: dict[int, int] = {}
    reduced = 0

    def cut(i: int, limit: int) -> int:
        content = units.get(i)
        if content is None:
            content = to_units(history[i].content, documented)
        new, name = truncate_with_disk_persist(content, history[i].tool_call_id, limit, ctx)
        units[i] = new
        report["results_truncated"] += 1
        report["results_persisted_disk"] += 1
        if name:
            report["spilled_files"].append(name)
        return len(new)

    for k in busy:
        for i in idx.members[k]:
            n = lengths[i] = idx.lens[i]
            # Pass 1 saves nothing in the report: ChatCLI measures after replacing.
            if n > per_result:
                lengths[i] = cut(i, per_result)
                reduced += n - lengths[i]
    for k in busy:
        group = idx.members[k]
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
            lengths[i] = cut(i, target)
            size -= n - lengths[i]
            reduced += n - lengths[i]
            report["bytes_saved_to_disk"] += n - lengths[i]
    report["total_final_chars"] = total - reduced
    if not units:
        return StageResult(history, report, changed=())
    out = {i: history[i].with_content(from_units(new)) for i, new in units.items()}
    return StageResult(with_changes(history, out), report, changed=tuple(units))


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("results_truncated", 0)


def describe(report: Mapping[str, Any]) -> str:
    return (f"{report.get('total_tool_results', 0)} results checked, "
            f"{report.get('results_truncated', 0)} spilled to files "
            f"({report.get('total_original_chars', 0)} → {report.get('total_final_chars', 0)} "
            "bytes).")


def quiet_note(facts: ReplayFacts) -> str | None:
    if facts.total("results_truncated"):
        return None
    return (f"The budget never spilled: no result was over {facts.env('per_result_max_chars')} "
            f"bytes when sent (largest result in the transcript: {facts.largest_result} bytes; "
            "the per-tool cap keeps successful results near 6 KB).")
