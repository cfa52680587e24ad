"""The input facts Codex's auto-compaction reads at every call (`codex_autocompact`): the
cost of each prefix, Codex's own estimate, where the responses, recorded markers, compaction
messages and recorded usages are. Kept in the stage's memo and extended from the first position
that changed, so a call costs what it appended.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message
from . import StageContext, changed_since
from ._codex import estimate_tokens, has_usage, is_compaction_message, recorded_marker


@dataclass
class InputFacts:
    """Per-position facts of the input, kept in the memo and extended from the first position
    that changed since the previous call, so a call costs what was appended."""

    seen: tuple[Message, ...] = ()
    prefix: list[int] = field(default_factory=lambda: [0])  # costs of input[:i]
    estimates: list[int] = field(default_factory=lambda: [0])  # non-system estimates
    positions: list[int] = field(default_factory=list)
    markers: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    hidden: list[int] = field(default_factory=list)
    usage_at: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, history: tuple[Message, ...], ctx: StageContext, cost: Any) -> InputFacts:
        memo = ctx.memo
        facts = memo.get("facts") if memo is not None else None
        if facts is None:
            facts, start = cls(), 0
        else:
            changed = changed_since(facts.seen, history, ctx, len(facts.seen))
            start = changed[0] if changed else min(len(facts.seen), len(history))
            facts.truncate(start)
        for i in range(start, len(history)):
            m = history[i]
            facts.prefix.append(facts.prefix[-1] + cost(m))
            facts.estimates.append(facts.estimates[-1]
                                   + (estimate_tokens(m) if m.role != "system" else 0))
            if m.role == "assistant":
                facts.positions.append(i)
                if has_usage(m):
                    facts.usage_at.append(i)
            marker = recorded_marker(m)
            if marker is not None:
                facts.markers.append((i, marker))
            if is_compaction_message(m):
                facts.hidden.append(i)
        facts.seen = history
        if memo is not None:
            memo["facts"] = facts
        return facts

    def truncate(self, n: int) -> None:
        del self.prefix[n + 1:]
        del self.estimates[n + 1:]
        for name in ("positions", "hidden", "usage_at"):
            values = getattr(self, name)
            del values[bisect_left(values, n):]
        self.markers = [(i, mk) for i, mk in self.markers if i < n]
