"""OpenCode's auto-compaction (SPEC-agents-2 §6.2 steps 1–3, 5), outgoing, a fold.

After each model call OpenCode compares that call's usage (`input + output + cache.read +
cache.write`) with `usable` (`limit.input − reserved` when the model declares an input
limit, else `limit.context − max output`); at or past it the next request starts from a
compaction: the user message "What did we do so far?", the summary (an assistant message)
and, since compact v2 (2026-06), about `keep.tokens` of the most recent messages verbatim;
when the overflow came mid-turn the last user message is sent again after the summary.
Recorded compactions (the summary marked `meta.compaction = {"source": "opencode", "kind":
"summary"}`, its prompt before it) are replayed: the request then starts at that prompt.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    fold,
    placeholder_text,
)
from ..history import frozen
from ..messages import Message
from ..token_model import step_call
from . import StageContext, StageResult, view_result
from ._agents2 import (
    AgentRun,
    add_fold_event,
    compaction_activity,
    compared_tokens,
    cut_out,
    describe_compaction,
    event_kind,
    late_call,
    measures_billed_by,
    quiet_compaction,
    step_markers,
    token_fields,
)
from ._opencode import COMPACTION_PROMPT, SOURCE, is_compaction_prompt, usable

NAME = "opencode_compact"


@dataclass(frozen=True)
class State:
    head: tuple[Message, ...] = ()
    next: int | None = None
    count: int = 0
    head_tokens: int = 0  # the head's cost under the counter


class _Run(AgentRun):
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        super().__init__(h, ctx, "opencode", SOURCE)
        self.limit = usable(ctx.params, self.session)
        self.keep = ctx.params.get("opencode_keep_tokens", 15000)
        self.hidden = sorted(set(self.summaries) | {
            i - 1 for i in self.summaries if i > 0 and is_compaction_prompt(h[i - 1])})

    def view(self, n: int, s: State) -> tuple[list[Message], int, int]:
        """V(input[:n], s), where recorded usage is valid again, and the counter's figure
        (prefix sums): recorded compactions not applied are left out."""
        start = self.lead if s.next is None else s.next
        shown = (start, start + 1) if s.next is not None and s.head == () else ()
        drops = [i for i in self.hidden[bisect_left(self.hidden, start):]
                 if i < n and i not in shown]
        body = cut_out(self.h, start, n, drops)
        counted = self.counted(n, start, s.head_tokens, drops)
        return [*self.h[:self.lead], *s.head, *body], self.lead + len(s.head), counted

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        view, valid, counted = self.view(n, s)
        tokens, used = compared_tokens(self.costs, self.source, view, valid, "input_output",
                                       counted=counted, call=step_call(self.ctx, h, n, j))
        fires = self.limit is not None and tokens >= self.limit
        start = self.lead if s.next is None else s.next
        mine = [i for i in step_markers(self.summaries, self.positions, j, n)
                if i >= start and not (
            s.next is not None and s.head == () and i in (start, start + 1))]
        info: dict[str, Any] = {"tokens_before": tokens, "token_source": used,
                                "trigger": None, "summary_source": None, "recorded": bool(mine),
                                "replayed_user": False}
        applied = predicted = False
        if mine and (self.recorded_mode or fires):
            i = mine[-1]
            info["late"] = late_call(self.h, [i], j)
            first = i - 1 if i > 0 and is_compaction_prompt(self.h[i - 1]) else i
            s = State((), first, s.count + 1)
            applied = True
            info.update(trigger="recorded", summary_source="recorded")
        elif fires and not self.recorded_mode:
            s = self.compact(s, view, n, j, tokens, info)
            predicted = True
            info.update(trigger="predicted", summary_source="placeholder")
        info["kind"] = event_kind(bool(mine), applied, predicted or (applied and fires))
        info["compacted"] = applied or predicted
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        return s, self.view(n, s)[0], info

    def compact(self, s: State, view: list[Message], n: int, j: int, tokens: int,
                info: dict[str, Any]) -> State:
        conv = view[self.lead:]
        tail_start, kept = len(conv), 0
        while tail_start > 0 and kept + self.costs.cost(conv[tail_start - 1]) <= self.keep:
            tail_start -= 1
            kept += self.costs.cost(conv[tail_start])
        while tail_start < len(conv) and conv[tail_start].role == "tool":
            tail_start += 1  # a kept tail never starts with a result whose call is gone
        tail = conv[tail_start:]
        text = placeholder_text(NAME, len(conv), tokens, j, self.placeholder, self.ctx.counter)
        head: list[Message] = [
            Message.of("user", COMPACTION_PROMPT, meta={"kind": "opencode_compaction"}),
            Message.of("assistant", text, meta={"kind": "placeholder_summary"}),
        ]
        last_user = next((m for m in reversed(conv) if m.role == "user"), None)
        mid_turn = bool(conv) and conv[-1].role != "user"
        if mid_turn and last_user is not None and all(m is not last_user for m in tail):
            head.append(last_user)
            info["replayed_user"] = True
        new = (*head, *tail)
        return State(new, n, s.count + 1, sum(self.costs.cost(m) for m in new))


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Compact the outgoing history as OpenCode would, from the call schedule.

    Invariant: a pure function of the input; recorded compactions not reached are left out."""
    h = frozen(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step)
    info, out = result.info, list(result.view)
    after = work.view(len(h), result.state)[2]
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"], "limit": work.limit,
        "tokens_before": info["tokens_before"], "tokens_after": after,
        **token_fields(ctx, info["token_source"], (after, len(out))),
        "summary_source": info["summary_source"],
        "recorded": info["recorded"], "replayed_user_message": info["replayed_user"],
        "compactions_so_far": result.state.count,
    }
    add_fold_event(report, NAME, info, after)
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    return describe_compaction(report, "Compacted", "usable size")


def quiet_note(facts: Any) -> str | None:
    return quiet_compaction(facts, "OpenCode", "usable size")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    return "compaction limit", usable(values, {})


measures_billed = measures_billed_by("opencode")
