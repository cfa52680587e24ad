"""A provider prompt cache, simulated over the prompts of a replay (SPEC §10).

Prompts are sequences of blocks (a hashable key and a token cost each; for a replay, the
tool definitions then one block per sent message). Matching is block by block: equal blocks
add their full cost and the first differing block ends the prefix, which is how a rewritten
message breaks a provider cache in practice.

Every prefix ever sent lives in one trie, so each call costs time proportional to its own
length however many earlier prompts are still cached.
- Anthropic style: one explicit breakpoint at the end of what was sent. A call reads the
  longest earlier *breakpoint* that is a prefix of its prompt and is still alive, then writes
  a new entry for the whole prompt (at the write price) when it reaches the minimum length.
- OpenAI style: every prefix of a prompt of at least the minimum length is cached; a call reads
  the longest live common prefix, counted from the minimum in fixed steps; no write premium.
An entry lives `ttl_seconds` from its last use, and a read refreshes it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .prices import ANTHROPIC, CacheRule


class _Node:
    __slots__ = ("children", "tokens", "used")

    def __init__(self, tokens: int) -> None:
        self.children: dict[Hashable, _Node] = {}
        self.tokens = tokens  # cumulative tokens of the prefix ending here
        self.used: float | None = None  # last write or read of this prefix (None: never cached)


@dataclass(frozen=True)
class CallCache:
    """One call's prompt under the cache: token split and cost in dollars."""

    input_tokens: int
    cached: int  # read from the cache
    written: int  # written to the cache at this call (Anthropic: at the write price)
    uncached: int  # input_tokens - cached
    cost: float
    no_cache_cost: float
    at: float

    @property
    def hit(self) -> bool:
        return self.cached > 0


class CacheSimulator:
    """Feed prompts in call order with `step`; it remembers what is cached and when."""

    def __init__(self, rule: CacheRule) -> None:
        self.rule = rule
        self.root = _Node(0)
        self.now = 0.0

    def step(self, keys: Sequence[Hashable], costs: Sequence[int],
             at: float | None = None) -> CallCache:
        """Send one prompt at time `at` (seconds; None: right after the previous call).

        Invariant: cached <= input tokens; cached is 0 or at least the minimum; Anthropic reads
        only whole earlier prompts; nothing expires between calls without timestamps.
        """
        if at is not None:
            self.now = max(self.now, at)  # out-of-order stamps never move time backwards
        now, rule = self.now, self.rule
        alive = lambda n: n.used is not None and now - n.used <= rule.ttl_seconds  # noqa: E731
        path: list[_Node] = []
        node = self.root
        reading = True
        read: _Node | None = None
        for key, part in zip(keys, costs, strict=True):
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node(node.tokens + part)
            if reading and alive(child):
                read = child
            elif rule.style != ANTHROPIC:
                # An idle prefix expired, and so did everything after it. (Anthropic entries
                # sit only at breakpoints, so a deeper one may still be alive.)
                reading = False
            path.append(child)
            node = child
        total = node.tokens
        prefix = read.tokens if read is not None else 0
        if rule.style == ANTHROPIC:
            cached = prefix
            if read is not None:
                read.used = now
            written = total - cached if total >= rule.min_tokens else 0
            if written:
                node.used = now
        else:
            cached = rule.cacheable(prefix)
            written = 0
            if total >= rule.min_tokens:
                written = total - cached
                for n in path:
                    n.used = now
        uncached = total - cached
        cost = rule.dollars(cached * rule.read_multiplier + written * rule.write_multiplier
                            + (uncached - written))
        return CallCache(total, cached, written, uncached, cost, rule.dollars(total), now)


def break_even(rewritten: int, saved: int, rule: CacheRule, remaining_calls: int
               ) -> BreakEven:
    """When a compaction that broke the cache pays for itself.

    `rewritten`: tokens of the previously cached prompt after the first changed message (they
    were read at the read price and must now be sent again); `saved`: how many tokens the
    compaction removed from that part. The event costs (rewritten - saved) tokens at the write
    price instead of `rewritten` at the read price; each later call then reads `saved` fewer
    tokens. Assumes the cache stays warm and the saving persists.
    """
    # Rounded so that token counts times 0.1 or 1.25 divide exactly as by hand.
    extra = round((rewritten - saved) * rule.write_multiplier
                  - rewritten * rule.read_multiplier, 6)
    per_call = round(saved * rule.read_multiplier, 6)
    if extra <= 0:
        calls: int | None = 0
    elif per_call <= 0:
        calls = None
    else:
        calls = math.ceil(extra / per_call)
    pays_back = calls is not None and calls <= remaining_calls
    return BreakEven(rule.dollars(extra), rule.dollars(per_call), calls, pays_back)


@dataclass(frozen=True)
class BreakEven:
    extra_cost: float  # dollars the break cost at its call, against no compaction
    saving_per_call: float  # dollars each later call saves
    calls: int | None  # further calls to pay back (None: never, the saving is not positive)
    pays_back: bool  # within the calls left in the session
