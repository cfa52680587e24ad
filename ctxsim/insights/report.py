"""One profile's replay seen through a provider's prompt cache: cost, breaks, break-even, loss.

`analyse` consumes a replay's calls once, feeding the cache simulation (`cache`), the break
explanation (`breaks`) and the information-loss tracker (`loss`) side by side.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult, Replay
from ctxsim.pipeline.tokens import TokenCounter, message_tokens

from .breaks import BreakCause, explain_break
from .cache import BreakEven, CacheSimulator, PromptIndex, break_even, shared_prefix
from .loss import Drop, LossReport, LossTracker, LostReference, ReRead
from .prices import CacheRule


@dataclass(frozen=True)
class CallRow:
    index: int
    input_tokens: int = 0
    cached: int = 0
    written: int = 0
    uncached: int = 0
    cost: float = 0.0
    no_cache_cost: float = 0.0
    failed: bool = False
    expired: bool = False  # the prompt extended the previous one, but its cache had lapsed
    cause: BreakCause | None = None  # why the prompt stopped extending the previous one


@dataclass(frozen=True)
class BreakEvent:
    """A compaction that broke the cached prefix, and when its savings pay for it."""

    call: int
    cause: BreakCause
    rewritten: int  # cached tokens after the first changed message, sent again
    saved: int  # tokens the compaction removed from that part
    payback: BreakEven

    @property
    def payback_call(self) -> int | None:
        return None if self.payback.calls is None else self.call + self.payback.calls


@dataclass
class ProfileInsights:
    rule: CacheRule
    calls: list[CallRow] = field(default_factory=list)
    events: list[BreakEvent] = field(default_factory=list)
    loss: LossReport = field(default_factory=LossReport)

    @property
    def sent(self) -> list[CallRow]:
        return [c for c in self.calls if not c.failed]

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def cached_tokens(self) -> int:
        return sum(c.cached for c in self.calls)

    @property
    def hit_rate(self) -> float:
        """Share of input tokens read from the cache."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    @property
    def no_cache_cost(self) -> float:
        return sum(c.no_cache_cost for c in self.calls)

    @property
    def breaks(self) -> list[CallRow]:
        return [c for c in self.calls if c.cause is not None]

    @property
    def never_paid_back(self) -> list[BreakEvent]:
        return [e for e in self.events if not e.payback.pays_back]


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch from a transcript timestamp (ISO 8601, naive = UTC, or a
    number); None when absent or unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def call_time(call: CallResult, messages: Sequence[Message]) -> float | None:
    """When the call was made: its answer's timestamp (the trailing call: the last message's).
    Without timestamps, None: the simulation takes calls as close together."""
    index = call.response_input_index
    if index is not None and index < len(messages):
        return timestamp(messages[index].meta.get("timestamp"))
    if call.raw_history:
        return timestamp(call.raw_history[-1].meta.get("timestamp"))
    return None


class _Costs:
    """Message costs by identity; the engine shares unchanged messages between calls. Each
    message also gets the cache a key: a small number, the same for equal messages (hashing a
    message walks all its fields, at every trie step)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._by_id: dict[int, tuple[Message, int, int]] = {}
        # Stateless stages build equal messages anew at every call: also cache by value.
        self._by_value: dict[Message, tuple[int, int]] = {}

    def __call__(self, m: Message) -> int:
        return self.of(m)[1]

    def of(self, m: Message) -> tuple[Message, int, int]:
        """The message, its cost and its key."""
        hit = self._by_id.get(id(m))
        if hit is not None and hit[0] is m:
            return hit
        value = self._by_value.get(m)
        if value is None:
            value = self._by_value[m] = (message_tokens(m, self.counter), len(self._by_value))
        hit = self._by_id[id(m)] = (m, *value)
        return hit


def analyse(replay: Replay, rule: CacheRule) -> ProfileInsights:
    """Replay every call once and simulate the cache over what was sent.

    Invariant: per call, cached + uncached = input tokens = the engine's sent tokens; a failed
    call (context overflow) sends nothing and leaves the cache as it was.

    Work per call is proportional to what changed since the previous prompt (issue 21): the
    replay says how much of it was kept (`CallResult.sent_kept`); the prompt's costs and
    positions by origin are updated by the edits that turn the previous prompt into this one
    (a sliding window removes or puts back a run and keeps the rest, issue 31), and the cache
    resumes its walk at the first changed message (past the first new key, in one loop).
    """
    out = ProfileInsights(rule)
    prompt = _Prompt(_Costs(replay.counter))
    sim = CacheSimulator(rule)
    tracker = LossTracker(replay.messages)
    prev_input = 0
    kept: int | None = _ALL  # leading messages shared with the last prompt sent, at least
    pending: list[tuple[int, BreakCause, int, int]] = []
    sent_indices: list[int] = []
    for call in replay.calls():
        tracker.step(call)
        if kept is not None:
            kept = None if call.sent_kept is None else min(kept, call.sent_kept)
        if call.error:
            out.calls.append(CallRow(call.call_index, failed=True))
            continue
        first = prompt.first
        prev = prompt.sent
        prev_len = len(prev)  # `update` edits it in place
        position = shared_prefix(prev, call.sent, kept or 0)
        old_tail, old_costs = prev[position:], prompt.costs[position + 1:]
        resume = prompt.update(call, position)
        result = sim.step(prompt.keys, prompt.costs, call_time(call, replay.messages), resume)
        cause = None
        expired = False
        if not first:
            if position < prev_len:
                cause = explain_break(call, old_tail[0], position, prompt.index)
                if cause.is_compaction:
                    rewritten = sum(old_costs)
                    saved = rewritten - prompt.still(old_tail, old_costs)
                    cached_before = rule.cacheable(prev_input) > 0
                    pending.append((call.call_index, cause,
                                    rewritten if cached_before else 0, saved))
            else:
                expired = result.cached < rule.cacheable(prev_input)
        out.calls.append(CallRow(
            call.call_index, result.input_tokens, result.cached, result.written,
            result.uncached, result.cost, result.no_cache_cost, expired=expired, cause=cause,
        ))
        sent_indices.append(call.call_index)
        prev_input = result.input_tokens
        kept = _ALL
    for index, cause, rewritten, saved in pending:
        remaining = len(sent_indices) - bisect_right(sent_indices, index)
        out.events.append(BreakEvent(index, cause, rewritten, saved,
                                     break_even(rewritten, saved, rule, remaining)))
    out.loss = tracker.report
    return out


_ALL = sys.maxsize  # nothing known to differ yet


class _Prompt:
    """The last prompt sent, as the cache sees it: keys (tool definitions and instructions,
    then one per message), their costs, and the positions of each origin (`index`). Updated in
    place by what changed (`PromptIndex.take`): a run removed, messages appended."""

    def __init__(self, cost: _Costs) -> None:
        self.cost = cost
        self.index = PromptIndex()
        self.first = True
        self.keys: list[Hashable] = []
        self.costs: list[int] = []  # per key
        self.total = 0  # of the messages' costs
        # origin -> the cost of its last copy in the prompt, 0 once it has none (not None)
        self._last: dict[int | None, int] = {}

    @property
    def sent(self) -> list[Message]:
        return self.index.messages

    def update(self, call: CallResult, position: int) -> int:
        """Take `call.sent`, the same as the last prompt up to `position`; returns how many
        leading keys are unchanged."""
        keys, costs = self.keys, self.costs
        if not keys:  # the first prompt: a placeholder for the tool definitions' key
            keys.append(None)
            costs.append(0)
        of = self.cost.of
        touched: set[int | None] = set()
        for start, end, put, removed in reversed(self.index.take(call.sent, position)):
            new = [of(m) for m in put]
            added = [c for _, c, _ in new]
            self.total += sum(added) - sum(costs[start + 1:end + 1])
            keys[start + 1:end + 1] = [key for _, _, key in new]
            costs[start + 1:end + 1] = added
            touched.update(m.origin for m in (*removed, *put))
        touched.discard(None)
        last, index = self._last, self.index
        for origin in touched:
            now = index.last(origin)
            last[origin] = of(now)[1] if now is not None else 0
        self.first = False
        # Tool definitions (and the gateway's instructions) lead the prompt and never change.
        extras = call.sent_tokens - self.total
        lead = ("tools+instructions", extras)
        if keys[0] == lead:
            return position + 1
        keys[0], costs[0] = lead, extras
        return 0

    def still(self, old: Sequence[Message], old_costs: Sequence[int]) -> int:
        """Tokens the messages of an earlier prompt's tail cost now: a message still sent at
        its origin's last position, one without an origin as it was, a removed one nothing
        (an injected one is assumed still there)."""
        # In C: an origin's last cost now, a message without one its own.
        return sum(map(self._last.get, map(_origin, old), old_costs))


_origin = attrgetter("origin")


# --- stored results ----------------------------------------------------------------------------

RESULT_VERSION = 1  # bump when what `as_data` writes changes shape


def as_data(insights: ProfileInsights) -> dict[str, Any]:
    """The insights as plain JSON data (the rule is not included: it is the result's key)."""
    return {
        "version": RESULT_VERSION,
        # One list per call, in CallRow's field order: half the size of a dict per call.
        "calls": [[c.index, c.input_tokens, c.cached, c.written, c.uncached, c.cost,
                   c.no_cache_cost, c.failed, c.expired,
                   asdict(c.cause) if c.cause is not None else None] for c in insights.calls],
        "events": [asdict(e) for e in insights.events],
        "loss": asdict(insights.loss),
    }


def from_data(rule: CacheRule, data: dict[str, Any]) -> ProfileInsights | None:
    """The insights `as_data` wrote (None when written by another version)."""
    if data.get("version") != RESULT_VERSION:
        return None
    calls = [CallRow(i, n, cached, written, uncached, cost, no_cache, failed, expired,
                     BreakCause(**cause) if cause is not None else None)
             for i, n, cached, written, uncached, cost, no_cache, failed, expired, cause
             in data["calls"]]
    events = [BreakEvent(e["call"], BreakCause(**e["cause"]), e["rewritten"], e["saved"],
                         BreakEven(**e["payback"])) for e in data["events"]]
    loss = data["loss"]
    report = LossReport(
        drops=[Drop(**d) for d in loss["drops"]],
        rereads=[ReRead(**{**r, "dropped": Drop(**r["dropped"])}) for r in loss["rereads"]],
        lost=[LostReference(**{**x, "dropped": Drop(**x["dropped"])}) for x in loss["lost"]],
    )
    return ProfileInsights(rule, calls, events, report)
