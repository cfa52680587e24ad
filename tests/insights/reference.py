"""The insights algorithm as it was before issue 21 made it incremental: every call walks the
whole prompt through the cache trie, rebuilds the per-call costs and scans the whole raw
history for drops. Kept verbatim as the oracle the incremental code must match exactly
(tests/insights/test_incremental.py)."""

# ruff: noqa: E731

from __future__ import annotations

from collections.abc import Hashable, Sequence

from ctxsim.insights.breaks import BreakCause, common_prefix, explain_break
from ctxsim.insights.cache import CallCache, break_even
from ctxsim.insights.loss import (
    GENERIC_MIN_RESULTS,
    GENERIC_SHARE,
    Drop,
    LossReport,
    LostReference,
    ReRead,
    call_key,
    identifiers,
)
from ctxsim.insights.prices import ANTHROPIC, CacheRule
from ctxsim.insights.report import BreakEvent, CallRow, ProfileInsights, _Costs, call_time
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult, Replay


class _Node:
    """A trie node of the reference cache: one object per prefix (what the cache module used
    before issue 31 numbered its nodes)."""

    __slots__ = ("children", "tokens", "used")

    def __init__(self, tokens: int) -> None:
        self.children: dict[Hashable, _Node] = {}
        self.tokens = tokens  # cumulative tokens of the prefix ending here
        self.used: float | None = None  # last write or read of this prefix (None: never cached)


class ReferenceCacheSimulator:
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


def reference_analyse(replay: Replay, rule: CacheRule) -> ProfileInsights:
    """Replay every call once and simulate the cache over what was sent.

    Invariant: per call, cached + uncached = input tokens = the engine's sent tokens; a failed
    call (context overflow) sends nothing and leaves the cache as it was.
    """
    out = ProfileInsights(rule)
    cost = _Costs(replay.counter)
    sim = ReferenceCacheSimulator(rule)
    tracker = ReferenceLossTracker(replay.messages)
    prev: tuple[Message, ...] | None = None
    prev_costs: list[int] = []
    prev_input = 0
    pending: list[tuple[int, BreakCause, int, int]] = []
    for call in replay.calls():
        tracker.step(call)
        if call.error:
            out.calls.append(CallRow(call.call_index, failed=True))
            continue
        costs = [cost(m) for m in call.sent]
        extras = call.sent_tokens - sum(costs)
        # Tool definitions (and the gateway's instructions) lead the prompt and never change.
        keys = [("tools+instructions", extras), *call.sent]
        result = sim.step(keys, [extras, *costs], call_time(call, replay.messages))
        cause = None
        expired = False
        if prev is not None:
            position = common_prefix(prev, call.sent)
            if position < len(prev):
                cause = explain_break(call, prev[position], position)
                if cause.is_compaction:
                    rewritten, saved = _region(prev, prev_costs, position, call.sent, costs)
                    cached_before = rule.cacheable(prev_input) > 0
                    pending.append((call.call_index, cause,
                                    rewritten if cached_before else 0, saved))
            else:
                expired = result.cached < rule.cacheable(prev_input)
        out.calls.append(CallRow(
            call.call_index, result.input_tokens, result.cached, result.written,
            result.uncached, result.cost, result.no_cache_cost, expired=expired, cause=cause,
        ))
        prev, prev_costs, prev_input = call.sent, costs, result.input_tokens
    sent_indices = [c.index for c in out.calls if not c.failed]
    for index, cause, rewritten, saved in pending:
        remaining = sum(1 for i in sent_indices if i > index)
        out.events.append(BreakEvent(index, cause, rewritten, saved,
                                     break_even(rewritten, saved, rule, remaining)))
    out.loss = tracker.report
    return out


def _region(prev: Sequence[Message], prev_costs: Sequence[int], position: int,
            sent: Sequence[Message], costs: Sequence[int]) -> tuple[int, int]:
    """Tokens of the previous prompt from `position` on, and how many fewer the same messages
    cost now (a removed message saves all of it; an injected one is assumed still there)."""
    now = {m.origin: c for m, c in zip(sent, costs, strict=True) if m.origin is not None}
    rewritten = sum(prev_costs[position:])
    still = sum(now.get(m.origin, 0) if m.origin is not None else c
                for m, c in zip(prev[position:], prev_costs[position:], strict=True))
    return rewritten, rewritten - still


def _how(raw: Message, sent: Message | None, spill_paths: Sequence[bytes]) -> str:
    if sent is None:
        return "removed"
    if any(p in sent.content for p in spill_paths):
        return "spilled"
    head = raw.content[:64]
    if head and sent.content.startswith(head):
        return "truncated"
    return "replaced"


class ReferenceLossTracker:
    """Feed every call of a replay in order with `step`; read `report` at the end."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        # tool_call_id -> (name, canonical arguments) of the call that issued it (the latest).
        self.calls: dict[str, tuple[str, str]] = {}
        for m in messages:
            for c in m.tool_calls:
                self.calls[c.id] = call_key(c.name, c.arguments)
        self.first_drop: dict[int, Drop] = {}
        self.reread_done: set[int] = set()
        self.lost_done: set[str] = set()
        self._raw: dict[int, Message] = {}  # every tool result seen so far, by origin
        self._seen: list[Message] = []  # the same, in the order they were seen
        # identifier -> (results searched, origins of those containing it), grown lazily.
        self._containing: dict[str, tuple[int, list[int]]] = {}
        self.spill_dirs: set[bytes] = set()
        self.report = LossReport()
        self._results = [m for m in messages if m.role == "tool"]
        self._generic_at = max(GENERIC_MIN_RESULTS, -(-len(self._results) * GENERIC_SHARE // 1))
        self._generic: dict[str, bool] = {}

    def step(self, call: CallResult) -> None:
        sent_by_origin = {m.origin: m for m in call.sent if m.origin is not None}
        for s in call.spills:
            self.spill_dirs.add(s.path.rsplit("/", 1)[0].encode("utf-8", "surrogatepass"))
        dropped: list[Drop] = []
        for raw in call.raw_history:
            if raw.role != "tool" or raw.origin is None:
                continue
            if raw.origin not in self._raw:
                self._raw[raw.origin] = raw
                self._seen.append(raw)
            sent = sent_by_origin.get(raw.origin)
            if sent is not None and (sent is raw or sent == raw):
                continue
            drop = self.first_drop.get(raw.origin)
            if drop is None:
                name = self.calls.get(raw.tool_call_id, ("", ""))[0]
                drop = Drop(raw.origin, call.call_index,
                            _how(raw, sent, tuple(self.spill_dirs)), name)
                self.first_drop[raw.origin] = drop
                self.report.drops.append(drop)
            dropped.append(drop)
        answer_index = call.response_input_index
        if not dropped or answer_index is None:
            return
        answer = self.messages[answer_index]
        self._rereads(call, answer_index, answer, dropped)
        self._lost_references(call, answer_index, answer, dropped)

    def _rereads(self, call: CallResult, answer_index: int, answer: Message,
                 dropped: list[Drop]) -> None:
        by_key: dict[tuple[str, str], list[Drop]] = {}
        for d in dropped:
            raw = self._raw[d.origin]
            if raw.tool_call_id in self.calls:
                by_key.setdefault(self.calls[raw.tool_call_id], []).append(d)
        for c in answer.tool_calls:
            for d in by_key.get(call_key(c.name, c.arguments), ()):
                if d.origin not in self.reread_done:
                    self.reread_done.add(d.origin)
                    self.report.rereads.append(ReRead(call.call_index, answer_index, d,
                                                      c.arguments))

    def _lost_references(self, call: CallResult, answer_index: int, answer: Message,
                         dropped: list[Drop]) -> None:
        mentioned = identifiers(answer.text)
        for c in answer.tool_calls:
            mentioned |= identifiers(c.arguments)
        # Search the answer's few identifiers in the dropped results (fast substring search)
        # rather than extracting every identifier of every result.
        by_origin = {d.origin: d for d in dropped}
        for ident in sorted(mentioned - self.lost_done):
            needle = ident.encode("utf-8")
            if self._is_generic(ident, needle):
                continue
            source = next((by_origin[o] for o in self._holding(ident, needle)
                           if o in by_origin), None)
            if source is None or _sent_mentions(call.sent, needle):
                continue
            self.lost_done.add(ident)
            self.report.lost.append(LostReference(call.call_index, answer_index, ident, source))


    def _holding(self, ident: str, needle: bytes) -> list[int]:
        """Origins of the tool results seen so far whose content contains `needle`."""
        searched, found = self._containing.get(ident, (0, []))
        for m in self._seen[searched:]:
            if needle in m.content and m.origin is not None:  # a seen result has its origin
                found.append(m.origin)
        self._containing[ident] = (len(self._seen), found)
        return found

    def _is_generic(self, ident: str, needle: bytes) -> bool:
        """A name (not a path, file or number) found in many of the session's results."""
        known = self._generic.get(ident)
        if known is None:
            known = False
            if "/" not in ident and "." not in ident and not (ident.isascii() and ident.isdigit()):
                count = 0
                for m in self._results:
                    if needle in m.content:
                        count += 1
                        if count >= self._generic_at:
                            known = True
                            break
            self._generic[ident] = known
        return known


def _sent_mentions(sent: Sequence[Message], needle: bytes) -> bool:
    for m in sent:
        if needle in m.content:
            return True
        if any(needle in c.arguments.encode("utf-8", "surrogatepass") for c in m.tool_calls):
            return True
    return False
