"""OpenHands V1's `LLMSummarizingCondenser` (software-agent-sdk, SPEC-agents-2 §2), outgoing,
a fold over the calls.

Events: one per message, an assistant message with tool calls one per call (a batch), its
results one each. Before each call: TOKENS when a cap is set and the view counts more (hard),
EVENTS when the view has more than `max_size` events (soft), REQUEST after a recorded
`CondensationRequest` (hard). The tail kept is the smallest of `max_size // 2 − keep_first −
1` (events), `len(view) // 2 − keep_first − 1` (request) and what remains after the shortest
prefix past `count − cap // 2` tokens (tokens); the forgotten range runs between
manipulation indices (never inside a batch or between a call and its result), and the summary
takes its place as a user message. A range too small (`minimum_progress`) is refused: soft →
nothing happens, hard → the whole view is summarised. Recorded condensations
(`meta.openhands_condensation` with `forgotten_event_ids` or a start/end id, `summary`,
`summary_offset`; ids matched through `meta.event_id` and `meta.call_event_ids`) are
replayed. The SDK's condensation step makes no agent LLM call: the call that follows sees the
condensed view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    assistant_positions,
    fold,
    marker_positions,
    placeholder_text,
)
from ..history import frozen
from ..messages import Message
from ..token_model import step_call
from . import StageContext, StageResult, view_result
from ._agents2 import (
    Costs,
    Sums,
    add_late_events,
    compaction_activity,
    compared_tokens,
    describe_compaction,
    event_kind,
    token_fields,
)

NAME = "openhands_v1_condenser"
# The agent LLM's effective_max_input_tokens (LiteLLM model metadata), which caps the view when
# max_tokens is unset: model id part → tokens [X: ctxsim's short table; unknown → no cap].
MODEL_INPUT = (("claude", 200_000), ("gpt-5", 272_000), ("gpt-4.1", 1_047_576),
               ("gpt-4o", 128_000), ("gemini", 1_048_576), ("deepseek", 128_000),
               ("qwen", 131_072))


def token_cap(params: Mapping[str, Any], session: Mapping[str, Any]) -> int | None:
    """min(max_tokens, the agent LLM's max input tokens) over the ones known."""
    model = str(session.get("model") or "").lower()
    known = next((n for part, n in MODEL_INPUT if part in model), None)
    window = session.get("model_context_window")
    if known is None and isinstance(window, int) and window > 0:
        known = window
    limits = [n for n in (params.get("openhands_v1_max_tokens"), known) if n is not None]
    return min(limits) if limits else None
Unit = int | Message  # an input index, or the summary message


Ranges = tuple[tuple[int, int], ...]  # merged, ascending [a, b) ranges of input indices


def to_ranges(indices: set[int]) -> Ranges:
    out: list[tuple[int, int]] = []
    for i in sorted(indices):
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return tuple(out)


def expand(ranges: Ranges) -> set[int]:
    return {i for a, b in ranges for i in range(a, b)}


@dataclass(frozen=True)
class State:
    forgotten: Ranges = ()
    summary: tuple[Message, int] | None = None  # (message, event offset)
    markers_done: int = 0
    count: int = 0
    requests_from: int = 0  # condensation requests before this input index are handled


def events_of(u: Unit, h: Sequence[Message]) -> int:
    if isinstance(u, Message):
        return 1
    m = h[u]
    return max(1, len(m.tool_calls)) if m.role == "assistant" else 1


def manipulation_starts(units: Sequence[Unit], h: Sequence[Message]) -> list[int]:
    """Event offsets where a range may start or end: the start of every unit that is not a
    tool result (results stay with their call), and the end of the view."""
    out, offset = [], 0
    for u in units:
        if isinstance(u, Message) or h[u].role != "tool":
            out.append(offset)
        offset += events_of(u, h)
    out.append(offset)
    return out


def _ids(marker: Mapping[str, Any]) -> set[Any]:
    ids = marker.get("forgotten_event_ids")
    if isinstance(ids, (list, tuple)):
        return set(ids)
    a, b = marker.get("forgotten_events_start_id"), marker.get("forgotten_events_end_id")
    if isinstance(a, int) and isinstance(b, int):
        return set(range(a, b + 1))
    return set()


class _Run:
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        p = ctx.params
        self.h, self.ctx = h, ctx
        self.max_size = p.get("openhands_v1_max_size", 240)
        self.keep_first = p.get("openhands_v1_keep_first", 2)
        self.cap = token_cap(p, ctx.session if isinstance(ctx.session, Mapping) else {})
        self.progress = p.get("openhands_v1_minimum_progress", 0.1)
        self.recorded_mode = p.get("openhands_v1_mode", "predict") == "recorded"
        self.source = p.get("openhands_v1_token_source", "anchored")
        self.placeholder = p.get("summary_placeholder_tokens", 2000)
        self.costs = Costs(ctx)
        self.markers = [i for i in marker_positions(h, ctx, "openhands_condensation")
                        if isinstance(h[i].meta.get("openhands_condensation"), Mapping)]
        # CondensationRequest events (the agent's context-window error, or the user), as the
        # importer marks the next message: `meta.openhands_condensation_request`.
        self.requests = [i for i in marker_positions(h, ctx, "openhands_condensation_request")
                         if h[i].meta.get("openhands_condensation_request") is True]
        self.positions = assistant_positions(h, ctx)
        self.cost_sums = Sums(h, ctx, "costs_sums", lambda h, i: self.costs.cost(h[i])).sums
        self.event_sums = Sums(h, ctx, "event_sums", lambda h, i: events_of(i, h)).sums

    def figures(self, n: int, s: State) -> tuple[int, int]:
        """(events, counter tokens) of the view of input[:n], from the prefix sums."""
        events, tokens = self.event_sums[n], self.costs.extras + self.cost_sums[n]
        for a, b in s.forgotten:
            if a >= n:
                break
            b = min(b, n)
            events -= self.event_sums[b] - self.event_sums[a]
            tokens -= self.cost_sums[b] - self.cost_sums[a]
        if s.summary is not None:
            events += 1
            tokens += self.costs.cost(s.summary[0])
        return events, tokens

    def units(self, n: int, s: State) -> list[Unit]:
        out: list[Unit] = []
        at = 0
        for a, b in s.forgotten:
            if a >= n:
                break
            out.extend(range(at, a))
            at = max(at, b)
        out.extend(range(at, n))
        if s.summary is not None:
            message, offset = s.summary
            at, events = 0, 0
            while at < len(out) and events < offset:
                events += events_of(out[at], self.h)
                at += 1
            out.insert(at, message)
        return out

    def messages(self, units: Sequence[Unit]) -> list[Message]:
        return [u if isinstance(u, Message) else self.h[u] for u in units]

    def summary_message(self, events: int, tokens: int, j: int) -> Message:
        text = placeholder_text(NAME, events, tokens, j, self.placeholder, self.ctx.counter)
        return Message.of("user", text, meta={"kind": "placeholder_summary"})

    def apply_recorded(self, i: int, s: State) -> State:
        marker = self.h[i].meta["openhands_condensation"]
        ids = _ids(marker)
        gone = expand(s.forgotten)
        for k in range(i):
            m = self.h[k]
            own = {m.meta.get("event_id"), *(m.meta.get("call_event_ids") or ())}
            if own & ids:
                gone.add(k)
        summary = None
        if isinstance(marker.get("summary"), str):
            offset = marker.get("summary_offset")
            summary = (Message.of("user", marker["summary"], meta={"kind": "recorded_summary"}),
                       offset if isinstance(offset, int) else 0)
        return State(to_ranges(gone), summary, s.markers_done + 1, s.count + 1, i + 1)

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        events, counted = self.figures(n, s)
        tokens, used = counted, "counter"
        if self.source != "counter":
            tokens, used = compared_tokens(self.costs, self.source,
                                           self.messages(self.units(n, s)), 0, counted=counted,
                                           call=step_call(self.ctx, h, n, j))
        info: dict[str, Any] = {"events_before": events, "tokens_before": tokens,
                                "token_source": used, "reason": None, "forgotten": 0,
                                "summary_source": None, "trigger": None, "recorded": False,
                                "hard_reset": False}
        # A marker sits on the message after the Condensation event: usually the response of
        # the call that saw the condensed view (index n itself, r(i) = j).
        pending = [i for i in self.markers[s.markers_done:] if i <= n]
        applied = False
        if pending:
            info["recorded"] = True
            for i in pending:
                s = self.apply_recorded(i, s)
            applied = True
            info.update(trigger="recorded", summary_source="recorded")
        predicted = False
        if not applied and not self.recorded_mode:
            request = any(s.requests_from <= i < n for i in self.requests)
            over = events > self.max_size or request or (
                self.cap is not None and tokens > self.cap)
            if over:
                s, predicted = self.condense(s, self.units(n, s), events, tokens, j, info,
                                             request)
            if predicted:
                s = State(s.forgotten, s.summary, s.markers_done, s.count, n)
        info["kind"] = event_kind(info["recorded"], applied, predicted)
        info["compacted"] = applied or predicted
        # Seen only once the response exists, i.e. at the next call: reported then.
        info["late"] = "recorded" if n in pending else None
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        return s, self.messages(self.units(n, s)), info

    def condense(self, s: State, units: list[Unit], events: int, tokens: int, j: int,
                 info: dict[str, Any], request: bool = False) -> tuple[State, bool]:
        over_tokens = self.cap is not None and tokens > self.cap
        over_events = events > self.max_size
        if not (over_tokens or over_events or request):
            return s, False
        info["reason"] = "request" if request else "tokens" if over_tokens else "events"
        hard = over_tokens or request
        tails = []
        if request:
            tails.append(events // 2 - self.keep_first - 1)
        if over_events:
            tails.append(self.max_size // 2 - self.keep_first - 1)
        if over_tokens:
            tails.append(self.token_tail(units, tokens))
        naive_end = events - max(0, min(tails))
        starts = manipulation_starts(units, self.h)
        start = next(x for x in starts if x >= min(self.keep_first, events))
        end = next(x for x in starts if x >= naive_end)
        forgotten_events = end - start
        if end <= start or forgotten_events < events * self.progress:
            if not hard:
                info["reason"] += " (refused: too little to forget)"
                return s, False
            start, end = 0, events  # hard context reset: the whole view is summarised
            info["hard_reset"] = True
        gone = expand(s.forgotten)
        offset = 0
        removed = 0
        for u in units:
            width = events_of(u, self.h)
            if start <= offset < end:
                removed += width
                if not isinstance(u, Message):
                    gone.add(u)
            offset += width
        info.update(forgotten=removed, trigger="predicted", summary_source="placeholder")
        summary = self.summary_message(removed, tokens, j)
        return State(to_ranges(gone), (summary, start), s.markers_done, s.count + 1), True

    def token_tail(self, units: list[Unit], tokens: int) -> int:
        """Events left after the shortest prefix of view[keep_first:] whose tokens exceed
        count − cap // 2 (whole units: a unit's events are forgotten together)."""
        excess = tokens - (self.cap or 0) // 2
        offset, running, total = 0, 0, sum(events_of(u, self.h) for u in units)
        for u in units:
            width = events_of(u, self.h)
            if offset >= self.keep_first:
                m = u if isinstance(u, Message) else self.h[u]
                running += self.costs.cost(m)
                if running > excess:
                    return total - offset - width
            offset += width
        return 0


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Condense the outgoing view as the V1 SDK would, from the call schedule.

    Invariant: a pure function of the input; the output is the input without the forgotten
    messages, the summary (placeholder or recorded) at its offset."""
    h = frozen(history)
    work = _Run(h, ctx)
    # Past steps read their response (a marker can sit on it): the current step's state is
    # not reused at the next call.
    result = fold(h, ctx, State(), work.step, reuse_current=False)
    info, out = result.info, list(result.view)
    after = work.figures(len(h), result.state)[1]
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"], "reason": info["reason"],
        "events_before": info["events_before"], "forgotten_events": info["forgotten"],
        "hard_reset": info["hard_reset"], "limit": work.max_size, "token_cap": work.cap,
        "tokens_before": info["tokens_before"], "tokens_after": after,
        **token_fields(ctx, info["token_source"], (after, len(out))),
        "summary_source": info["summary_source"],
        "recorded": info["recorded"], "condensations_so_far": result.state.count,
    }
    add_late_events(report, NAME, result, after, "recorded", info["summary_source"])
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("compacted"):
        return describe_compaction(report, f"Condensed {report.get('forgotten_events')} events",
                                   "event limit")
    return (f"{report.get('events_before')} events, {report.get('tokens_before')} tokens "
            f"({report.get('token_source')}): within max_size {report.get('limit')}"
            + (f" and the cap {report.get('token_cap')}." if report.get("token_cap") else "."))


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    peak = max((r.get("events_before") or 0 for r in facts.reports), default=0)
    return (f"The OpenHands V1 condenser never fired: the view peaked at {peak} events, within "
            f"max_size {facts.value('openhands_v1_max_size')}.")
