"""What the call views of one paused replay remember from call to call (issue 31): each
message's tools and whether it differs from its raw one, the raw history and the history each
call started from by origin (both brought up from the last call's, not read anew), and the
last view made, which the next call's view starts from (`ctxsim.replays.alignment`).

Pure Python (no Django).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter, is_not
from typing import TYPE_CHECKING, Any

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult

if TYPE_CHECKING:
    from ctxsim.replays.alignment import CallView

_origin = attrgetter("origin")


def by_origin(history: Iterable[Message]) -> dict[int, Message]:
    """The first message of each origin (messages without one left out), built in C."""
    items = list(history)
    items.reverse()  # so that the first of an origin is the one the dict keeps
    out: dict[Any, Message] = dict(zip(map(_origin, items), items, strict=True))
    out.pop(None, None)
    return out


# What `ViewMemo.size` counts: a dictionary entry (with its share of the table), a 2-tuple,
# and a view's row across its columns (a list slot each, its status, flags and tools).
_ENTRY, _PAIR, _COLUMNS = 64, 64, 12 * 8


@dataclass
class ViewMemo:
    """What the call views of one replay remember between its calls: each message's tools
    (by identity, holding the message) and the tool names of the raw history's calls, read
    once (the raw history only grows)."""

    tools: dict[int, tuple[Message, tuple[str, ...]]] = field(default_factory=dict)
    # One tuple object per distinct set of names: the rows' tools pickle as references when a
    # call view goes to the shared cache.
    tool_tuples: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    # A sent message differs from its raw one (both never change), by the message's identity.
    changed: dict[int, tuple[Message, bool]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    scanned: int = 0
    raw_origins: dict[int, Message] = field(default_factory=dict)
    raw_read: int = 0
    capped: set[int] = field(default_factory=set)
    dispatch_read: int = 0
    # `started_by_origin`: the history the last call started from, by origin (the first
    # message of each and its position).
    started: Sequence[Message] = ()
    started_map: dict[int, Message] = field(default_factory=dict)
    started_first: dict[int, int] = field(default_factory=dict)
    last: tuple[CallResult, CallView] | None = None  # the last view made (services)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def size(self) -> int:
        """Estimated bytes it holds beyond the messages themselves (a dictionary entry, a
        pair, a column slot each; the last view's columns and stage maps)."""
        entries = (len(self.tools) + len(self.changed) + len(self.names) + len(self.capped)
                   + len(self.raw_origins) + len(self.started_map) + len(self.started_first))
        pairs = len(self.tools) + len(self.changed)
        view = self.last[1] if self.last is not None else None
        rows = len(view) if view is not None else 0
        maps = view.stage_maps_made if view is not None else 0
        return (_ENTRY * (entries + rows * maps) + _PAIR * pairs + _COLUMNS * rows
                + 8 * len(self.started))

    def raw_by_origin(self, raw: Sequence[Message]) -> dict[int, Message]:
        """`by_origin(raw)`, extended from the last call's (a shorter history: read anew)."""
        if len(raw) < self.raw_read:
            return by_origin(raw)
        for origin, m in by_origin(raw[self.raw_read:]).items():
            self.raw_origins.setdefault(origin, m)
        self.raw_read = len(raw)
        return self.raw_origins

    def started_by_origin(self, history: Sequence[Message]) -> dict[int, Message]:
        """`by_origin(history)` of the history a call started from, brought up from the last
        call's: the two share their first messages (the very objects) until the first the
        persistent stages rewrote, so only the messages past it are read — in Python while
        they are few, else the whole map anew in C. The map is this memo's: good until the
        next call's."""
        old, first, found = self.started, self.started_first, self.started_map
        n = min(len(old), len(history))
        p = next(compress(range(n), map(is_not, old, history)), n)
        if (len(old) - p) + (len(history) - p) > max(64, len(history) // 8):
            items = list(history)
            origins = list(map(_origin, items))
            items.reverse()
            origins.reverse()
            found = self.started_map = dict(zip(origins, items, strict=True))
            first = self.started_first = dict(zip(origins, range(len(items) - 1, -1, -1),
                                                  strict=True))
            found.pop(None, None)
            first.pop(None, None)
        else:
            for m in old[p:]:  # gone with the messages past the shared ones
                if first.get(m.origin, -1) >= p:
                    del first[m.origin], found[m.origin]
            for j in range(p, len(history)):
                m = history[j]
                if m.origin is not None and m.origin not in first:
                    first[m.origin], found[m.origin] = j, m
        self.started = history if isinstance(history, tuple) else tuple(history)  # as it is now
        return found

    def capped_of(self, dispatch: Sequence[Mapping[str, Any]]) -> set[int]:
        """The inputs a dispatch stage capped (`Replay.dispatch`, which only grows)."""
        if len(dispatch) > self.dispatch_read:
            self.capped.update(d["input_index"] for d in dispatch[self.dispatch_read:]
                               if d.get("stored_len") != d.get("input_len"))
            self.dispatch_read = len(dispatch)
        return self.capped

    def names_of(self, raw: Sequence[Message]) -> dict[str, str]:
        if len(raw) > self.scanned:
            self.names.update((c.id, c.name) for m in raw[self.scanned:] for c in m.tool_calls)
            self.scanned = len(raw)
        return self.names
