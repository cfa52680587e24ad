"""Gemini CLI's chat compression before every call (SPEC-agents-2 §1.4), outgoing, a fold.

When the last prompt reached `compressionThreshold × token limit`, the history (what precedes
the pending request) is split at a user prompt past 70 % of its characters (everything when
it ends on a plain model answer); the head becomes one `<state_snapshot>` summary followed by
Gemini's acknowledgement, the tail is kept, older tool responses past a 50,000-token budget
are truncated first (≥ v0.26). A compression whose result is not smaller is discarded and
only budget truncation is tried from then on. Recorded compressions (a summary marked
`meta.compaction = {"source": "gemini-cli", "kind": "summary", "kept": k}`, the `$set.messages`
checkpoint of ≥ v0.39 files: its acknowledgement follows it, `kept` = how many messages before
it the checkpoint kept) are replayed with their own summary. The environment-context message
Gemini puts first is not in transcripts and is not added [X].
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    fold,
    placeholder_text,
    u16len,
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
    era_values,
    event_kind,
    late_call,
    measures_billed_by,
    quiet_compaction,
    recorded_usage,
    step_markers,
    text,
    token_fields,
)
from ._gemini import (
    ACK,
    ERAS,
    SOURCE,
    estimate,
    json_size,
    output_file,
    token_limit,
    truncated_output,
)

NAME = "gemini_compress"
PRESERVE = 0.3
# The environment context Gemini CLI puts first in every new history (getInitialChatHistory):
# `<session_context>` now, the bare text before [S …environmentContext.ts].
ENV_PREFIXES = ("<session_context>", "This is the Gemini CLI. We are setting up the context")


@dataclass(frozen=True)
class State:
    head: tuple[Message, ...] = ()  # summary, acknowledgement, kept tail (truncated copies)
    next: int | None = None  # input index where the view continues (None: after the lead)
    failed: bool = False
    count: int = 0
    head_tokens: int = 0  # the head's cost under the counter


def split_point(contents: Sequence[Message], fraction: float = 1 - PRESERVE) -> int:
    """findCompressSplitPoint: the first user prompt (no tool response) at or past `fraction`
    of the characters; else everything when the history ends on a plain model answer; else
    the last user prompt seen (0: nothing)."""
    sizes = [json_size(m) for m in contents]
    target = fraction * sum(sizes)
    cumulative = 0
    last = 0
    for i, m in enumerate(contents):
        if m.role == "user":
            if cumulative >= target:
                return i
            last = i
        cumulative += sizes[i]
    if contents and contents[-1].role == "assistant" and not contents[-1].tool_calls:
        return len(contents)
    return last


def budget_truncate(contents: Sequence[Message], budget: int, cap: int,
                    session: Mapping[str, Any]) -> tuple[list[Message], int]:
    """Newest to oldest, tool responses within `budget` tokens stay; each one that would pass
    it is truncated to `cap` characters (its placeholder's estimate counted instead)."""
    out = list(contents)
    counter = 0
    truncated = 0
    names = {c.id: c.name for m in contents for c in m.tool_calls}
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m.role != "tool":
            continue
        t = estimate(m)
        if counter + t > budget:
            body = text(m)
            short = body if u16len(body) <= max(cap, 0) else truncated_output(body, output_file(
                session, names.get(m.tool_call_id, ""), m.tool_call_id), max(cap, 0))
            if short != body:
                out[i] = m.with_content(short.encode("utf-8", "surrogatepass"))
                truncated += 1
            counter += estimate(out[i])
        else:
            counter += t
    return out, truncated


class _Run(AgentRun):
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        super().__init__(h, ctx, "gemini", SOURCE)
        self.values, self.era = era_values(ctx, ERAS, "gemini_version")
        self.limit = token_limit(ctx.params, self.session)
        self.threshold = int(self.values["gemini_compression_threshold"] * self.limit)
        first = h[self.lead] if len(h) > self.lead else None
        self.env = first if first is not None and first.role == "user" and \
            text(first).lstrip().startswith(ENV_PREFIXES) else None

    def view(self, n: int, s: State) -> tuple[list[Message], int, int]:
        """V(input[:n], s), the view index where recorded usage is valid again, and the
        view's full prompt under the counter (from prefix sums: no scan)."""
        start = self.lead if s.next is None else s.next
        drops = self.drops(n, s)
        body = cut_out(self.h, start, n, drops)
        head = list(s.head)
        at = next((k for k, m in enumerate(head[:2]) if s.next is not None
                   and m is self.h[s.next - 1]), None)
        nxt = s.next
        if body and at is not None and nxt is not None and nxt not in drops and nxt < n \
                and self.is_ack(nxt):
            # A recorded acknowledgement that came as the next message goes right after its
            # summary, before the kept messages, as Gemini's checkpoint orders them.
            head.insert(at + 1, body.pop(0))
        counted = self.counted(n, start, s.head_tokens, drops)
        return [*self.h[:self.lead], *head, *body], self.lead + len(s.head), counted

    def cost_of(self, messages: Sequence[Message]) -> int:
        return sum(self.costs.cost(m) for m in messages)

    def is_ack(self, i: int) -> bool:
        m = self.h[i]
        return m.role == "assistant" and (m.meta.get("compaction_ack") is True
                                          or text(m) == ACK)

    def drops(self, n: int, s: State) -> list[int]:
        """Input indices from the view's start left out: recorded checkpoints not applied,
        and their acknowledgement."""
        start = self.lead if s.next is None else s.next
        out: list[int] = []
        for i in self.summaries[bisect_left(self.summaries, start):]:
            if i >= n:
                break
            out.append(i)
            if i + 1 < n and self.is_ack(i + 1):
                out.append(i + 1)
        return out

    def body_start(self, n: int, s: State, count: int) -> int:
        """The input index of the `count`-th last message of the view's body (n: none)."""
        drops = set(self.drops(n, s))
        i = n
        while count and i > 0:
            i -= 1
            if i not in drops:
                count -= 1
        return i

    def recorded(self, i: int, n: int, s: State) -> State:
        """The view after the recorded checkpoint at input index i (seen by prefix n)."""
        marker = self.h[i].meta.get("compaction") or {}
        given = marker.get("kept")
        kept = max(0, min(given if isinstance(given, int) else 0, i - self.lead))
        head = [self.h[i]] if self.env is None or i - kept <= self.lead else [self.env, self.h[i]]
        nxt = i + 1
        if nxt < n and self.is_ack(nxt):
            head.append(self.h[nxt])
            nxt += 1
        head += self.h[i - kept:i]
        return State(tuple(head), nxt, False, s.count + 1, self.cost_of(head))

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        view, valid, counted = self.view(n, s)
        tokens, used = compared_tokens(self.costs, self.source, view, valid, counted=counted,
                                       call=step_call(self.ctx, h, n, j))
        fires = tokens >= self.threshold
        start = self.lead if s.next is None else s.next
        # A recorded summary belongs to the call it precedes (r(i), SPEC-agents §2.5.0.4).
        mine = [i for i in step_markers(self.summaries, self.positions, j, n) if i >= start]
        info: dict[str, Any] = {"tokens_before": tokens, "token_source": used,
                                "recorded": bool(mine), "predicted": False,
                                "summary_source": None, "trigger": None, "split": None,
                                "truncated_responses": 0, "status": "noop"}
        applied = False
        if mine and (self.recorded_mode or fires):
            s = self.recorded(mine[-1], n, s)
            info["late"] = late_call(self.h, mine[-1:], j)
            applied = True
            info.update(summary_source="recorded", trigger="recorded", status="compressed")
        elif fires and not self.recorded_mode:
            s, info = self.compress(s, view, n, j, tokens, info)
        info["predicted"] = fires and not self.recorded_mode
        info["kind"] = event_kind(bool(mine), applied, info["status"] != "noop" and fires
                                  and not self.recorded_mode)
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        after, _, _ = self.view(n, s)
        return s, after, info

    def compress(self, s: State, view: list[Message], n: int, j: int, tokens: int,
                 info: dict[str, Any]) -> tuple[State, dict[str, Any]]:
        conv = view[self.lead:]
        last = max((k for k, m in enumerate(conv) if m.role == "assistant"), default=-1)
        history, request = conv[:last + 1], conv[last + 1:]
        previous = next((recorded_usage(m) for m in reversed(history)
                         if recorded_usage(m) is not None), None)
        last_prompt = int(previous["total_input"]) if previous else tokens
        cap = min(4 * max(self.limit - last_prompt, 0), self.values["gemini_truncate_threshold"])
        budget = self.values["gemini_function_response_budget"]
        if budget > 0:
            truncated, count = budget_truncate(history, budget, cap, self.session)
        else:
            truncated, count = list(history), 0
        info["truncated_responses"] = count
        # The request's messages from the input continue the view; any before them (in the
        # head) are carried into the new head.
        body_len = len(view) - self.lead - len(s.head)
        from_body = min(len(request), body_len)
        request_start = self.body_start(n, s, from_body)
        carried = tuple(request[:len(request) - from_body])
        if s.failed:
            if count and sum(estimate(m) for m in truncated) < tokens:
                info.update(status="content_truncated", trigger="predicted")
                kept = (*truncated, *carried)
                return State(kept, request_start, True, s.count, self.cost_of(kept)), info
            return s, info
        split = split_point(truncated)
        info["split"] = split
        if split == 0:
            info["reason"] = "nothing_to_compress"
            return s, info
        ph = placeholder_text(NAME, split, tokens, j, self.placeholder, self.ctx.counter)
        summary = Message.of("user", f"<state_snapshot>\n{ph}\n</state_snapshot>",
                             meta={"kind": "placeholder_summary"})
        ack = Message.of("assistant", ACK, meta={"kind": "placeholder_summary"})
        env = (self.env,) if self.env is not None else ()
        head = (*env, summary, ack, *truncated[split:], *carried)
        if sum(estimate(m) for m in head) > tokens:
            info.update(status="failed_inflated")
            return State(s.head, s.next, True, s.count, s.head_tokens), info
        info.update(status="compressed", trigger="predicted", summary_source="placeholder")
        return State(head, request_start, False, s.count + 1, self.cost_of(head)), info


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Compress the outgoing history as Gemini CLI would, from the call schedule.

    Invariant: the output is the leading system block, then either the input (recorded
    checkpoints left out) or one summary, Gemini's acknowledgement and a kept tail, followed
    by what came after the compression; a pure function of the input."""
    h = frozen(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step)
    info, out = result.info, list(result.view)
    after = work.view(len(h), result.state)[2]
    compacted = info["status"] in ("compressed", "content_truncated")
    report: dict[str, Any] = {
        "compacted": compacted, "trigger": info["trigger"], "status": info["status"],
        "limit": work.threshold, "token_limit": work.limit,
        "tokens_before": info["tokens_before"], "tokens_after": after,
        **token_fields(ctx, info["token_source"], (after, len(out))),
        "summary_source": info["summary_source"],
        "split": info["split"], "truncated_responses": info["truncated_responses"],
        "recorded": info["recorded"], "predicted": info["predicted"], "era": work.era.label,
        "compressions_so_far": result.state.count,
    }
    if info.get("reason"):
        report["reason"] = info["reason"]
    add_fold_event(report, NAME, info,
                   after if info["kind"] != "recorded_not_predicted" else None)
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    era = f" {report['era']}." if report.get("era") else ""
    return describe_compaction(report, "Compressed", "compression threshold") + era


def quiet_note(facts: Any) -> str | None:
    return quiet_compaction(facts, "Gemini CLI", "compression threshold")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    limit = token_limit(values, {})
    return "compression threshold", int(values.get("gemini_compression_threshold", 0.5) * limit)


measures_billed = measures_billed_by("gemini")
