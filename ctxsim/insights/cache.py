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
from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import accumulate, count, repeat

from ctxsim.pipeline.messages import Message

from .prices import ANTHROPIC, CacheRule

NEVER = -math.inf  # the last use of a prefix never cached


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
    """Feed prompts in call order with `step`; it remembers what is cached and when.

    The trie is numbers, not objects (issue 31: a sliding window adds a few hundred nodes per
    call, and a million small objects made the garbage collector most of the analysis): node
    `n`'s parent, key (as a small code), tokens and last use are the `n`th items of four
    arrays. The nodes one step creates are numbered consecutively, so a node's child is
    usually the next number (its parent and code say so); other children are in `_edges`,
    keyed by code and parent. The new nodes of a step are made in C, whatever their number.

    Consecutive prompts mostly share a prefix, so a step resumes from the previous prompt's
    path through the trie at the first position that may differ and walks only the rest:
    time proportional to what changed, not to the prompt (issue 21). What the full walk would
    find on the shared part is kept alongside the path:
    - Anthropic: the positions on the path of entries that may still be alive (a stack).
      An entry found idle stays dead, since time never moves back and only a write at the
      end of a prompt revives one, which pushes it again; so dead ones are popped for good.
    - OpenAI: every write stamps a whole path, so along a path the last use never grows with
      depth and the live prefixes are an initial run, found by bisection. The stamp of the
      latest write is kept once for the shared part (`_stamp` up to `_until`) and stored in
      the nodes only as they leave the path.
    """

    def __init__(self, rule: CacheRule) -> None:
        self.rule = rule
        self.now = 0.0
        self._codes: defaultdict[Hashable, int] = defaultdict(count().__next__)
        # Per node (0: the root): parent, key code, cumulative tokens of the prefix ending
        # there, last write or read (NEVER: never cached).
        self._parent = array("q", (-1,))
        self._code = array("q", (-1,))
        self._tokens = array("q", (0,))
        self._used = array("d", (NEVER,))
        self._edges: dict[int, int] = {}  # code << 32 | parent -> child, past the chains
        self._keys: list[Hashable] = []  # the previous prompt
        self._path = array("q")  # its nodes: _path[i] ends with _keys[i]
        self._marks: list[int] = []  # Anthropic: path positions of possibly live entries
        self._stamp = 0.0  # OpenAI: the last write's time, for _path[:_until]
        self._until = 0

    def step(self, keys: Sequence[Hashable], costs: Sequence[int],
             at: float | None = None, kept: int | None = None) -> CallCache:
        """Send one prompt at time `at` (seconds; None: right after the previous call).

        `kept`: how many leading keys are known equal to the previous prompt's (a lower bound
        is enough; None: compared here). Only `keys[kept:]` and `costs[kept:]` are read.

        Invariant: cached <= input tokens; cached is 0 or at least the minimum; Anthropic reads
        only whole earlier prompts; nothing expires between calls without timestamps.
        """
        if len(keys) != len(costs):
            raise ValueError("one cost per key")
        if at is not None:
            self.now = max(self.now, at)  # out-of-order stamps never move time backwards
        now, rule = self.now, self.rule
        ttl = rule.ttl_seconds
        path, marks, used, tokens = self._path, self._marks, self._used, self._tokens
        anthropic = rule.style == ANTHROPIC
        if kept is None:
            kept = shared_prefix(self._keys, keys)
        kept = max(0, min(kept, len(path), len(keys)))
        if anthropic:
            while marks and marks[-1] >= kept:
                marks.pop()
        elif self._until > kept:
            stamp = self._stamp
            for n in path[kept:self._until]:  # leaving the path: store the pending stamp
                if used[n] < stamp:
                    used[n] = stamp
            self._until = kept
        del path[kept:]
        del self._keys[kept:]
        node = path[-1] if path else 0
        size = len(keys)
        i = kept
        codes, parent, code, edges = self._codes, self._parent, self._code, self._edges
        nodes = len(parent)
        while i < size:
            c = codes[keys[i]]
            child = node + 1
            if child >= nodes or parent[child] != node or code[child] != c:
                found = edges.get(c << 32 | node)
                if found is None:
                    break
                child = found
            if anthropic and now - used[child] <= ttl:
                marks.append(i)
            path.append(child)
            node = child
            i += 1
        if i < size:  # past the first new key every node is new (a sliding window: most)
            new = size - i
            code.extend(map(codes.__getitem__, keys[i:]))
            if nodes != node + 1:
                edges[code[nodes] << 32 | node] = nodes
            parent.append(node)
            parent.extend(range(nodes, nodes + new - 1))
            tokens.extend(map(tokens[node].__add__, accumulate(costs[i:])))
            used.extend(repeat(NEVER, new))
            path.extend(range(nodes, nodes + new))
            node = nodes + new - 1
        self._keys.extend(keys[kept:])
        total = tokens[node]
        if anthropic:
            while marks and not now - used[path[marks[-1]]] <= ttl:
                marks.pop()
            read = path[marks[-1]] if marks else None
            cached = tokens[read] if read is not None else 0
            if read is not None:
                used[read] = now
            written = total - cached if total >= rule.min_tokens else 0
            if written:
                used[node] = now
                if not marks or marks[-1] != len(path) - 1:
                    marks.append(len(path) - 1)
        else:
            live = self._live_prefix(now)
            cached = rule.cacheable(tokens[path[live - 1]] if live else 0)
            written = 0
            if total >= rule.min_tokens:
                written = total - cached
                self._stamp, self._until = now, len(path)  # every node of the path, lazily
        uncached = total - cached
        cost = rule.dollars(cached * rule.read_multiplier + written * rule.write_multiplier
                            + (uncached - written))
        return CallCache(total, cached, written, uncached, cost, rule.dollars(total), now)

    def _live_prefix(self, now: float) -> int:
        """OpenAI: how many leading nodes of the path are alive (they form an initial run)."""
        path, until, stamp, used = self._path, self._until, self._stamp, self._used
        ttl = self.rule.ttl_seconds
        low, high = 0, len(path)
        while low < high:
            mid = (low + high) // 2
            last = used[path[mid]]
            if mid < until and last < stamp:
                last = stamp
            if now - last <= ttl:
                low = mid + 1
            else:
                high = mid
        return low


def shared_prefix(previous: Sequence[Hashable], current: Sequence[Hashable],
                  start: int = 0) -> int:
    """Number of leading items two sequences share (the same object or equal), knowing the
    first `start` are shared. Blocks are compared as tuples (identity, then equality, in C),
    doubling in size, and only the first differing block is looked at item by item."""
    n = min(len(previous), len(current))
    i, size = min(start, n), 8
    while i < n:
        end = min(i + size, n)
        if tuple(previous[i:end]) != tuple(current[i:end]):
            for j in range(i, end):
                a, b = previous[j], current[j]
                if a is not b and a != b:
                    return j
        i, size = end, size * 2
    return n


_STEP = 1 << 20  # between the serials of consecutive copies when numbered afresh


class PromptIndex:
    """The last prompt taken, as a list, and where each origin's copies are in it.

    `take` updates it from the previous prompt by what changed: a prompt mostly keeps a prefix
    and resends the rest, but a sliding window (AIVAX's truncation, issue 31) keeps the end of
    the previous prompt after its first messages, having removed a run before it or put back
    some it had removed, then appends; a rewrite in the middle replaces one message. Found in
    C (identities), so a call costs time proportional to the messages removed and added, not
    to the window: each copy has a serial number, ascending along the prompt, that a change
    elsewhere leaves alone (spaced out, renumbered when a gap is full)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._serials: list[int] = []
        self._by_serial: dict[int, Message] = {}
        self.at: dict[int, list[int]] = {}  # origin -> serials of its copies, ascending

    def __contains__(self, origin: object) -> bool:
        return origin in self.at

    def last(self, origin: int | None) -> Message | None:
        """The origin's last copy in the prompt (None: none)."""
        places = self.at.get(origin) if origin is not None else None
        return self._by_serial[places[-1]] if places else None

    def take(self, sent: Sequence[Message], position: int) -> list[Change]:
        """Take `sent`, the same as the previous prompt up to `position`. Returns what
        changed, in order: each change replaced `old[start:end]` (`removed`) by `put` (one at
        the old prompt's end appends). `messages` is edited in place: a prompt that rewrites
        a message near its end costs the messages changed, not a copy of all of them (4,000
        calls of ChatCLI's budget took twice 2,000 calls' time per call)."""
        old, serials = self.messages, self._serials
        edits = _edits(old, sent, position)
        at, by_serial = self.at, self._by_serial
        if len(edits) == 1 and edits[0][0] == len(old):  # appended only
            put = edits[0][2]
            base = serials[-1] if serials else -_STEP
            for k, m in enumerate(put, 1):
                by_serial[base + k * _STEP] = m
                if m.origin is not None:
                    at.setdefault(m.origin, []).append(base + k * _STEP)
            old += put
            serials += range(base + _STEP, base + _STEP * (len(put) + 1), _STEP)
            return [(len(old) - len(put), len(old) - len(put), put, [])]
        changes: list[Change] = []
        fresh_of: list[list[int]] = []
        full = False
        low = -_STEP  # the serial of the last copy placed so far (in the prompt as it becomes)
        for start, end, put in edits:
            if start > 0 and (not changes or start > changes[-1][1]):
                low = serials[start - 1]
            removed = old[start:end]
            for m, s in zip(removed, serials[start:end], strict=True):
                del by_serial[s]
                if m.origin is not None:
                    places = at[m.origin]
                    del places[bisect_left(places, s)]
                    if not places:
                        del at[m.origin]
            high = (serials[end] if end < len(old)
                    else max(low, serials[-1] if serials else 0) + (len(put) + 1) * _STEP)
            gap = (high - low) // (len(put) + 1)
            full = full or gap < 1
            fresh = [low + gap * (k + 1) for k in range(len(put))]
            for m, s in zip(put, fresh, strict=True):
                by_serial[s] = m
                if m.origin is not None:
                    places = at.setdefault(m.origin, [])
                    if places and places[-1] > s:
                        places.insert(bisect_left(places, s), s)
                    else:
                        places.append(s)
            if fresh:
                low = fresh[-1]
            changes.append((start, end, put, removed))
            fresh_of.append(fresh)
        # In place, the last change first: the positions of the earlier ones stay true.
        for (start, end, put, _removed), fresh in zip(reversed(changes), reversed(fresh_of),
                                                      strict=True):
            old[start:end] = put
            serials[start:end] = fresh
        if full:  # no room was left between two copies: number them all afresh
            self._renumber()
        return changes

    def _renumber(self) -> None:
        self._serials = list(range(0, len(self.messages) * _STEP, _STEP))
        self._by_serial = dict(zip(self._serials, self.messages, strict=True))
        self.at = {}
        for m, s in zip(self.messages, self._serials, strict=True):
            if m.origin is not None:
                self.at.setdefault(m.origin, []).append(s)


Edit = tuple[int, int, list[Message]]  # old[start:end] replaced by these
Change = tuple[int, int, list[Message], list[Message]]  # an edit and what it removed


def _edits(old: list[Message], sent: Sequence[Message], position: int) -> list[Edit]:
    """How `sent` differs from `old` from `position` on: runs of `old` it keeps (its very
    objects, or equal ones), found by identity in C, and what it holds between them."""
    n, size = len(old), len(sent)
    if position >= n:
        return [(n, n, list(sent[n:]))] if size > n else []
    where = dict(zip(map(id, old[position:]), range(position, n), strict=True))
    edits: list[Edit] = []
    i, j = position, position  # old[:i] and sent[:j] are accounted for
    while i < n:
        start, end = j, None
        while start < size:
            end = where.get(id(sent[start]))
            if end is not None and end >= i:
                break
            start += 1
        if start >= size or end is None:
            edits.append((i, n, list(sent[j:])))
            return edits
        edits.append((i, end, list(sent[j:start])))
        length = _run(old, end, sent, start)
        i, j = end + length, start + length
    if j < size:
        edits.append((n, n, list(sent[j:])))
    return edits


def _run(a: Sequence[Message], i: int, b: Sequence[Message], j: int) -> int:
    """How many items `a[i:]` and `b[j:]` share at their start (the same object or equal),
    compared in doubling blocks, in C."""
    n = min(len(a) - i, len(b) - j)
    k, step = 0, 8
    while k < n:
        stop = min(k + step, n)
        if tuple(a[i + k:i + stop]) != tuple(b[j + k:j + stop]):
            while k < stop and (a[i + k] is b[j + k] or a[i + k] == b[j + k]):
                k += 1
            return k
        k, step = stop, step * 2
    return n


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
