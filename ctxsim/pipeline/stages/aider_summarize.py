"""Aider's chat-history summarisation (`ChatSummary`, SPEC-agents-2 §5), outgoing, a fold.

Aider sends `done_messages` (past exchanges) before the current exchange; when they count more
than `max_chat_history_tokens` (`min(max(max_input / 16, 1024), 8192)` by default), they are
summarised: from the end, messages are kept while the tail stays under half the limit, the
split moves down to follow an assistant message, and the head becomes one user message
"I spoke to you previously about a number of things.\\n" + summary (all of them when the split
is at 4 or less); this recurses (depth ≤ 3) while summary + tail is not under the limit, and an
assistant "Ok." is appended when the result does not end on an assistant message. Aider does
this in a background thread joined before the next request, so ctxsim applies it at the call
after the exchange that crossed the limit [X]. Tokens: the profile's counter (Aider counts with
the model's tokenizer) [X]; nothing of this is in `.aider.chat.history.md`, so summaries are
always placeholders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    COMPACTION_EVENTS,
    compaction_event,
    fold,
    placeholder_text,
)
from ..history import frozen
from ..messages import Message
from . import StageContext, StageResult, view_result
from ._agents2 import (
    AgentRun,
    compaction_activity,
    quiet_peak,
)

NAME = "aider_summarize"
PREFIX = "I spoke to you previously about a number of things.\n"
MIN_SPLIT = 4
# Model families' max_input_tokens (litellm's metadata as Aider reads it) [X: ctxsim's table].
MODEL_INPUT = (("gpt-4o", 128_000), ("gpt-4.1", 1_047_576), ("gpt-5", 272_000),
               ("claude", 200_000), ("gemini", 1_048_576), ("deepseek", 128_000),
               ("o3", 200_000), ("o4", 200_000))


def max_input(params: Mapping[str, Any], session: Mapping[str, Any]) -> int | None:
    if params.get("aider_max_input_tokens"):
        return int(params["aider_max_input_tokens"])
    model = str(session.get("model") or "").lower()
    return next((n for prefix, n in MODEL_INPUT if prefix in model), None)


def history_limit(params: Mapping[str, Any], session: Mapping[str, Any]) -> int:
    """max_chat_history_tokens: the parameter, else 1/16 of the input limit within 1,024 and
    8,192 (1,024 when the model is unknown)."""
    if params.get("aider_max_chat_history_tokens"):
        return int(params["aider_max_chat_history_tokens"])
    n = max_input(params, session)
    return 1024 if n is None else int(min(max(n / 16, 1024), 8192))


def summarize(messages: Sequence[Message], sizes: Sequence[int], limit: int,
              make: Any, depth: int = 0) -> list[tuple[Message, int]]:
    """ChatSummary.summarize_real on (message, tokens) pairs; `make(items)` gives the summary
    (message, tokens) for `items` summarised messages."""
    pairs = list(zip(messages, sizes, strict=True))
    total = sum(sizes)
    if total <= limit and depth == 0:
        return pairs
    if len(pairs) <= MIN_SPLIT or depth > 3:
        return [make(len(pairs))]
    tail_tokens, split = 0, len(pairs)
    half = limit // 2
    for i in range(len(pairs) - 1, -1, -1):
        if tail_tokens + sizes[i] < half:
            tail_tokens += sizes[i]
            split = i
        else:
            break
    while split > 1 and pairs[split - 1][0].role != "assistant":
        split -= 1
    if split <= MIN_SPLIT:
        return [make(len(pairs))]
    summary = make(split)
    tail = pairs[split:]
    if summary[1] + sum(t for _, t in tail) < limit:
        return [summary, *tail]
    rest = [summary, *tail]
    return summarize([m for m, _ in rest], [t for _, t in rest], limit, make, depth + 1)


@dataclass(frozen=True)
class State:
    head: tuple[Message, ...] = ()  # the summarised done messages
    next: int | None = None  # input index where the unsummarised messages continue
    count: int = 0


class _Run(AgentRun):
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        super().__init__(h, ctx)
        self.limit = history_limit(ctx.params, self.session)

    def view(self, n: int, s: State) -> list[Message]:
        start = self.lead if s.next is None else s.next
        return [*self.h[:self.lead], *s.head, *self.h[start:n]]

    def prompt(self, n: int, s: State) -> int:
        """The full prompt of view(n, s) from the prefix sums."""
        start = self.lead if s.next is None else s.next
        return self.counted(n, start, self.costs.of(s.head))

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        start = self.lead if s.next is None else s.next
        # The current exchange starts at the last user message (none: nothing is done yet).
        cur = next((i for i in range(n - 1, start - 1, -1) if self.h[i].role == "user"), None)
        tokens = self.costs.of(s.head) + (self.sums[cur] - self.sums[start]
                                           if cur is not None else 0)
        info: dict[str, Any] = {"tokens_before": tokens, "done_messages": len(s.head) + (
            cur - start if cur is not None else 0), "compacted": False, "kept": None}
        if cur is not None and tokens > self.limit:
            done = [*s.head, *self.h[start:cur]]
            sizes = [self.costs.cost(m) for m in done]

            def make(items: int) -> tuple[Message, int]:
                text = placeholder_text(NAME, items, tokens, j, self.placeholder,
                                        self.ctx.counter)
                m = Message.of("user", PREFIX + text, meta={"kind": "placeholder_summary"})
                return m, self.costs.cost(m)

            result = [m for m, _ in summarize(done, sizes, self.limit, make)]
            if result and result[-1].role != "assistant":
                result.append(Message.of("assistant", "Ok.", meta={"kind": "aider_ok"}))
            s = State(tuple(result), cur, s.count + 1)
            info.update(compacted=True, kept=len(result))
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        return s, self.view(n, s), info


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Summarise the done messages as Aider would, from the call schedule.

    Invariant: a pure function of the input; only messages before the current exchange are
    ever replaced, and the current exchange is sent as it is."""
    h = frozen(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step)
    info, out = result.info, list(result.view)
    after = work.prompt(len(h), result.state)
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": "predicted" if info["compacted"] else None,
        "limit": work.limit, "tokens_before": info["tokens_before"], "tokens_after": after,
        "done_messages": info["done_messages"], "kept_messages": info["kept"],
        "token_source": "counter", "summary_source": "placeholder" if info["compacted"]
        else None, "summaries_so_far": result.state.count,
    }
    if info["compacted"]:
        report[COMPACTION_EVENTS] = [compaction_event(
            NAME, "predicted", "predicted", "placeholder", info["tokens_before"], after)]
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("compacted"):
        return (f"Summarised the chat history: {report.get('done_messages')} done messages "
                f"({report.get('tokens_before')} tokens) → {report.get('kept_messages')}.")
    return (f"Chat history {report.get('tokens_before')} tokens, within "
            f"max_chat_history_tokens {report.get('limit')}.")


def quiet_note(facts: Any) -> str | None:
    quiet = quiet_peak(facts)
    if quiet is None:
        return None
    peak, limit = quiet
    return (f"Aider never summarised: the chat history peaked at {peak:,} tokens, within "
            f"max_chat_history_tokens {limit:,}.")

