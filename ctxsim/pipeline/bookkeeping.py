"""A replay's per-call bookkeeping (SPEC §3, issue 21): what each message costs, looked up by
identity, and what changed between calls, stage by stage, so a call's work is what changed
at it and each stage's memo is handed a `Delta`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import compress
from operator import itemgetter, not_

from .history import Prefix
from .messages import Message
from .stages import Delta, changed_positions
from .tokens import TokenCounter, tokens_by_identity


class CostCache:
    """Message costs by object identity: unchanged messages are the same objects at every call,
    so each is measured once (contents are also cached by the counter)."""

    def __init__(self, counter: TokenCounter, image_rule: str = "bytes4"):
        self.counter = counter
        self.image_rule = image_rule
        self._costs: dict[int, tuple[Message, int]] = {}

    def cost(self, m: Message) -> int:
        return tokens_by_identity(self._costs, m, self.counter, self.image_rule)

    def total(self, history: Sequence[Message]) -> int:
        return sum(self.each(list(history)))

    def each(self, messages: list[Message]) -> list[int]:
        """Each message's tokens, looked up in C (a message held in the dict keeps its id, so
        an entry found by id is that very message); only the ones never measured are measured
        first (a gateway stage hands out a new placeholder or two among thousands at each
        call)."""
        costs = self._costs
        found = list(map(costs.get, map(id, messages)))
        if None in found:
            cost = self.cost
            for m in compress(messages, map(not_, found)):
                cost(m)
            found = list(map(costs.get, map(id, messages)))
        return list(map(itemgetter(1), found))  # type: ignore[arg-type]

    def _sum(self, messages: list[Message]) -> int:
        return sum(self.each(messages))

    def after(self, before: Sequence[Message], after: Sequence[Message], tokens: int,
              changed: Sequence[int] | None) -> int:
        """Tokens of `after`, given those of `before` and the positions where it holds other
        messages (None: its length changed), so only the replaced messages are measured."""
        if changed is None:
            return self.total(after)
        if len(changed) < 16:
            cost = self.cost
            for i in changed:
                tokens += cost(after[i]) - cost(before[i])
            return tokens
        # A stage rewriting every older result at every call without saying what changed
        # since (`Since`): in C, on tuples (a `History` indexes in Python).
        return (tokens + self._sum(list(map(_indexable(after).__getitem__, changed)))
                - self._sum(list(map(_indexable(before).__getitem__, changed))))

    def grown(self, before: Sequence[Message], after: Sequence[Message], tokens: int,
              positions: Sequence[int]) -> int:
        """Tokens of `after`, given those of `before`, which it holds but at `positions` and
        past its length."""
        cost, n = self.cost, len(before)
        for i in positions:
            if i < n:
                tokens += cost(after[i]) - cost(before[i])
        for i in range(n, len(after)):
            tokens += cost(after[i])
        return tokens


def _lowest(part: Collection[int]) -> int:
    """The lowest of a non-empty set of positions: a `Prefix` of positions is a view of a list
    a stage appended to in order (`tool_context`'s older results, most of a long history at
    every call), so its first."""
    return part[0] if isinstance(part, Prefix) else min(part)


def _indexable(history: Sequence[Message]) -> Sequence[Message]:
    return history if isinstance(history, (tuple, list)) else tuple(history)


def rewritten(before: Sequence[Message], after: Sequence[Message],
               reported: Sequence[int] | None) -> Sequence[int] | None:
    """Where a stage put other messages than it was given; None when it changed the length."""
    if after is before:
        return ()
    if len(after) != len(before):
        return None
    return reported if reported is not None else tuple(changed_positions(before, after))


_Parts = tuple[Collection[int], ...]  # a set of positions: the union of these


class Deltas:
    """What changed between calls, stage by stage, so each stage's memo gets a `Delta`.

    A stage's input at call k differs from its input at call k-1 only where the persistent
    stages rewrote the history at k-1 (those rewrites are kept), where any stage before it
    rewrote it at k-1 or at k, and past the length of the history at k-1 (appended messages,
    the anchor). A stage that changes a length makes the positions unknown (no `Delta`) for
    the stages after it; it keeps one for its own input at the next call. The same reasoning
    after the last stage bounds what the sent prompt kept (`sent_kept`). Sets of positions are
    kept as the parts they are the union of (`_Parts`), joined only when read: a stage
    rewriting every older result reports most of a long history at every call."""

    def __init__(self) -> None:
        self.base_len = 0  # length of the persistent history at the previous call
        self.carried: _Parts | None = ()  # persistent rewrites at the previous call
        # slot -> (input, output, changes before the stage, changes through it) last call
        self.previous: dict[int, tuple[Sequence[Message], Sequence[Message],
                                       _Parts | None, _Parts | None]] = {}
        self._now: _Parts | None = ()
        self._next_carried: _Parts | None = ()
        self._last_now: _Parts | None = ()  # every stage's rewrites at the previous call

    def start(self) -> None:
        self._now = ()
        self._next_carried = ()

    def delta(self, slot: int) -> Delta | None:
        prev = self.previous.get(slot)
        if prev is None or self.carried is None or self._now is None:
            return None
        before_in, before_out, given, made = prev
        if made is None:
            # The stage changed the length at the previous call: its output cannot be
            # compared position by position, but its input still can (an outgoing stage that
            # compacts at every call keeps a Delta for what it was given).
            if given is None:
                return None
            before_out, made = before_in, given
        appended = range(self.base_len, max(len(before_in), len(before_out)))
        return Delta(before_in, before_out, (*self.carried, *made, *self._now, appended))

    def ran(self, slot: int, phase: str, history: Sequence[Message],
            out: Sequence[Message], changed: Sequence[int] | None) -> None:
        given = self._now
        now: _Parts | None = None
        if given is not None and changed is not None:
            now = (*given, changed) if changed else given
        self.previous[slot] = (history, out, given, now)
        self._now = now
        if phase == "persistent":
            self._next_carried = now

    def sent_kept(self) -> int | None:
        """Leading positions where this call's output holds the previous call's objects: below
        the previous persistent length, and not rewritten by a stage at either call nor by
        the persistent phase carried over. Call after the last stage, before `finish`."""
        if self.carried is None or self._last_now is None or self._now is None:
            return None
        return min((self.base_len, *(_lowest(part) for part in (
            *self.carried, *self._last_now, *self._now) if part)))

    def finish(self, persistent_len: int) -> None:
        self.base_len = persistent_len
        self.carried = self._next_carried
        self._last_now = self._now
