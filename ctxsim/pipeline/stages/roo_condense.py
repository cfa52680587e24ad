"""Roo Code's context management before every request (`manageContext`, SPEC-agents-2 §4),
outgoing, a fold.

`prev = contextTokens + tokens(last message)`, where contextTokens is the previous request's
total (prompt + output); `allowed = window × 0.9 − reserved output`. With auto-condense on and
`100 × prev / window ≥ autoCondenseContextPercent` or `prev > allowed`, the conversation is
condensed: ≥ 3.30 ("fresh start") one `## Conversation Summary` user message replaces every
message since the last summary; ≤ 3.29 the first message, an assistant summary and the last
three messages remain (rejected when not smaller). Without a condensation and `prev > allowed`
the sliding window hides half of the visible messages after the first (≥ 3.30 behind a
marker). Recorded summaries (`meta.compaction = {"source": "roo-code", "kind": "summary"}` on
the `isSummary` message; ≤ 3.29 files already lack what was condensed) are replayed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    fold,
    marker_positions,
    placeholder_text,
)
from ..history import frozen
from ..messages import Message
from ..token_model import shown_after, step_call
from . import StageContext, StageResult, view_result
from ._agents2 import (
    AgentRun,
    Era,
    add_fold_event,
    compaction_activity,
    compared_tokens,
    cut_out,
    describe_compaction,
    era_values,
    event_kind,
    late_call,
    measures_billed_by,
    quiet_compaction,
    step_markers,
    token_fields,
)

NAME = "roo_condense"
SOURCE = "roo-code"
SUMMARY_PREFIX = "## Conversation Summary\n"
ERAS = (
    Era("0.0", "Roo Code ≤ 3.29: first message + summary + last 3 messages",
        {"roo_condense_style": "keep_last_3"},
        "RooCodeInc/Roo-Code@2f1b94f4 src/core/condense/index.ts (N_MESSAGES_TO_KEEP = 3)"),
    Era("3.30", "Roo Code ≥ 3.30: fresh-start summary, non-destructive",
        {"roo_condense_style": "fresh_start"},
        "RooCodeInc/Roo-Code@cb836567 src/core/condense/index.ts"),
)


def _is_slide(marker: Any) -> bool:
    return isinstance(marker, Mapping) and marker.get("source") == SOURCE and \
        marker.get("kind") == "sliding_window"


def context_window(params: Mapping[str, Any], session: Mapping[str, Any]) -> int:
    if params.get("roo_context_window"):
        return int(params["roo_context_window"])
    window = session.get("model_context_window")
    if isinstance(window, int) and window > 0:
        return window
    return 200_000 if "claude" in str(session.get("model") or "") else 128_000


def allowed_tokens(window: int, reserved: int) -> int:
    return int(window * 0.9 - reserved)


@dataclass(frozen=True)
class State:
    head: tuple[Message, ...] = ()  # what replaces the input before `next`
    next: int | None = None  # None: nothing condensed
    count: int = 0


class _Run(AgentRun):
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        super().__init__(h, ctx, "roo", SOURCE)
        p = ctx.params
        self.values, self.era = era_values(ctx, ERAS, "roo_version")
        self.window = context_window(p, self.session)
        reserved = p.get("roo_reserved_tokens")
        self.reserved = 8192 if reserved is None else reserved
        self.allowed = allowed_tokens(self.window, self.reserved)
        self.percent = p.get("roo_condense_percent", 100)
        self.auto = p.get("roo_auto_condense", True)
        self.style = self.values["roo_condense_style"]
        self.slides = [i for i in marker_positions(h, ctx, "compaction")
                       if _is_slide(h[i].meta["compaction"])]
        self.skip = set(self.summaries) | set(self.slides)
        self.skip_sorted = sorted(self.skip)

    def view(self, n: int, s: State) -> tuple[list[Message], int, int]:
        """V(input[:n], s), where recorded usage is valid again, and the counter's figure
        (prefix sums): recorded summaries and sliding-window markers not applied are left
        out (an applied marker is where the view continues)."""
        start = self.lead if s.next is None else s.next
        drops = [i for i in self.skip_sorted[bisect_left(self.skip_sorted, start):]
                 if i < n and i != s.next]
        body = cut_out(self.h, start, n, drops)
        counted = self.counted(n, start, self.costs.of(s.head), drops)
        return [*self.h[:self.lead], *s.head, *body], self.lead + len(s.head), counted

    def recorded_slide(self, i: int, s: State) -> State:
        """≥ 3.30's recorded sliding window: what it tagged `truncation_parent` is hidden,
        its marker message shown before the first message it kept."""
        start = self.lead if s.next is None else s.next
        kept = [self.h[k] for k in range(start, i)
                if k not in self.skip and self.h[k].meta.get("truncation_parent") is None]
        return State((*s.head, *kept), i, s.count + 1)

    def recorded(self, i: int, s: State) -> State:
        m = self.h[i]
        if m.role == "assistant":  # ≤ 3.29: [first message, summary, ...]
            first = self.h[self.lead:self.lead + 1] if i > self.lead else ()
            return State((*first, m), i + 1, s.count + 1)
        return State((m,), i + 1, s.count + 1)

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        view, valid, counted = self.view(n, s)
        conv = view[self.lead:]
        call = step_call(self.ctx, h, n, j)
        if self.source == "anchored":  # the provider's tokens of the whole view
            prev, used = compared_tokens(self.costs, self.source, view, valid,
                                         counted=counted, call=call)
        else:  # Roo's own: the previous request's prompt + output, and the new message
            last = self.costs.cost(view[-1]) if conv else 0
            context, used = compared_tokens(self.costs, self.source,
                                            view[:-1] if conv else view, valid,
                                            "input_output", counted=counted - last)
            prev = context + last
        percent = 100 * prev / self.window
        over = prev > self.allowed
        fires = self.auto and (percent >= self.percent or over)
        start = self.lead if s.next is None else s.next
        # A recorded summary belongs to the call it precedes (r(i), SPEC-agents §2.5.0.4).
        mine = [i for i in step_markers(self.summaries, self.positions, j, n) if i >= start]
        slides = [i for i in step_markers(self.slides, self.positions, j, n) if i >= start]
        info: dict[str, Any] = {"tokens_before": prev, "token_source": used,
                                "percent": round(percent, 1), "trigger": None,
                                "summary_source": None, "action": None,
                                "recorded": bool(mine or slides)}
        applied = predicted = False
        if slides and not mine and (self.recorded_mode or over):
            s = self.recorded_slide(slides[-1], s)
            applied = True
            info.update(trigger="recorded", action="sliding_window")
        elif mine and (self.recorded_mode or fires):
            s = self.recorded(mine[-1], s)
            info["late"] = late_call(self.h, mine[-1:], j)
            applied = True
            info.update(trigger="recorded", summary_source="recorded", action="condense")
        elif not self.recorded_mode and (fires or over):
            done = self.condense(s, view, n, j, prev) if fires else None
            if done is None and over:
                done = self.slide(s, view, n)
                info["action"] = "sliding_window" if done is not None else None
            else:
                info["action"] = "condense" if done is not None else None
            if done is not None:
                s = done
                predicted = True
                info.update(trigger="predicted", summary_source=(
                    "placeholder" if info["action"] == "condense" else None))
        info["kind"] = event_kind(bool(mine or slides), applied,
                                  predicted or (applied and (fires or over)))
        info["compacted"] = applied or predicted
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        return s, self.view(n, s)[0], info

    def condense(self, s: State, view: list[Message], n: int, j: int,
                 prev: int) -> State | None:
        conv = view[self.lead:]
        if self.style == "fresh_start":
            since = conv[1:] if s.next is not None else conv  # the view starts at the summary
            if len(since) < 2:
                return None  # "condensed recently"
            text = placeholder_text(NAME, len(since), prev, j, self.placeholder,
                                    self.ctx.counter)
            summary = Message.of("user", SUMMARY_PREFIX + text,
                                 meta={"kind": "placeholder_summary"})
            return State((summary,), n, s.count + 1)
        if len(conv) <= 4:
            return None
        covered = conv[:-3]
        text = placeholder_text(NAME, len(covered), prev, j, self.placeholder, self.ctx.counter)
        summary = Message.of("assistant", text, meta={"kind": "placeholder_summary"})
        head = (conv[0], summary, *conv[-3:])
        if self.costs.prompt([*view[:self.lead], *head]) >= prev:
            return None  # the condensation is rejected: not smaller
        return State(head, n, s.count + 1)

    def slide(self, s: State, view: list[Message], n: int) -> State | None:
        """truncateConversation(0.5): hide floor((visible − 1) × 0.5), rounded down to even,
        after the first visible message."""
        conv = view[self.lead:]
        remove = int((len(conv) - 1) * 0.5)
        remove -= remove % 2
        if remove <= 0:
            return None
        kept = [conv[0]]
        if self.style == "fresh_start":
            kept.append(Message.of(
                "user", f"[Sliding window truncation: {remove} messages hidden to reduce "
                "context]", meta={"kind": "roo_truncation_marker"}))
        return State((*kept, *conv[1 + remove:]), n, s.count + 1)


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Condense or slide the outgoing history as Roo Code would, from the call schedule.

    Invariant: a pure function of the input; recorded summaries not reached are left out."""
    h = frozen(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step)
    info, out = result.info, list(result.view)
    after = work.view(len(h), result.state)[2]
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"], "action": info["action"],
        "limit": work.allowed, "window": work.window, "percent": info["percent"],
        "threshold_percent": work.percent, "tokens_before": info["tokens_before"],
        "tokens_after": after, **token_fields(ctx, info["token_source"], (after, len(out))),
        "summary_source": info["summary_source"], "recorded": info["recorded"],
        "era": work.era.label, "condensations_so_far": result.state.count,
    }
    add_fold_event(report, NAME, info, after)
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("action") == "sliding_window":
        return (f"Sliding window: {report.get('tokens_before')} → {shown_after(report)} "
                "tokens.")
    era = f" {report['era']}." if report.get("era") else ""
    return describe_compaction(report, "Condensed", "allowed size") + era


def quiet_note(facts: Any) -> str | None:
    return quiet_compaction(facts, "Roo Code", "allowed size (window × 0.9 − reserved output)")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    reserved = values.get("roo_reserved_tokens")
    return "condense limit", allowed_tokens(context_window(values, {}),
                                            8192 if reserved is None else reserved)


measures_billed = measures_billed_by("roo")
