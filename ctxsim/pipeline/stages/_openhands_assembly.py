"""OpenHands' message assembly (SPEC-agents §2.5.6): how `ConversationMemory` turns the
condensed view of events into the messages of a request (`v0`), or the kept messages in their
order (`plain`), with `[llm] max_message_chars` applied.

`openhands_condenser` decides what the view holds; its run mixes in `Assembly` for the
messages and their tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..agents_common import PLACEHOLDER_KIND, placeholder_message
from ..messages import Message, decode_for_display
from ..tokens import tokens_by_identity
from . import StageContext

MASKED = "<MASKED>"
TRUNCATED = "\n[... Observation truncated due to length ...]\n"
PLAIN_KINDS = ("system", "user_message", "agent_message")


@dataclass(frozen=True)
class Event:
    """One OpenHands event: `id` (None for a summary), its kind, the message it comes from
    (index in the input) and, for an action, which call of that message."""

    id: int | None
    kind: str  # system | user_message | agent_message | action | observation | masked | summary
    message: int = -1
    call: int = 0
    text: str = ""
    source: str = ""  # of a summary: placeholder | recorded


def truncate_content(text: str, limit: int) -> str:
    """OpenHands `truncate_content`: the middle of an over-long text (code points) is cut."""
    if limit < 0 or len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNCATED + text[-half:]


class Assembly:
    """The assembly half of the condenser's run: the run sets these attributes."""

    h: tuple[Message, ...]
    ctx: StageContext
    memo: dict[str, Any]
    events: list[Event]
    ends: list[int]
    plain: bool
    max_chars: int
    extras: int
    costs: dict[int, tuple[Message, int]]
    shaped: dict[tuple[int, bool], tuple[Message, Message]]

    def cost(self, m: Message) -> int:
        return tokens_by_identity(self.costs, m, self.ctx.counter)

    def prompt(self, messages: Sequence[Message]) -> int:
        return sum(self.cost(m) for m in messages) + self.extras

    def _event_message(self, e: Event) -> Message:
        """The user message of a masked or summary event, one object per event value."""
        cache = self.memo.setdefault("event_messages", {})
        hit = cache.get(e)
        if hit is None:
            hit = cache[e] = self._new_event_message(e)
        return hit

    def _new_event_message(self, e: Event) -> Message:
        if e.kind == "summary":
            return placeholder_message("user", e.text, PLACEHOLDER_KIND if e.source
                                       == "placeholder" else "condensation_summary")
        return placeholder_message("user", e.text, "masked_observation")

    def assemble(self, view: list[Event], n: int) -> tuple[list[Message], dict[str, Any]]:
        """The messages OpenHands sends for `view` (events of input[:n]), and their tokens."""
        if not self.plain:
            return self._v0(view, n)
        out, info = self._plain(view)
        out, dropped = _filter_unmatched(out)
        info["dropped_groups"] += dropped
        out = [self._truncate(m) for m in out]
        info["tokens"] = self.prompt(out) - self.extras
        return out, info

    def assembled_tokens(self, view: list[Event], n: int) -> int:
        return self.assemble(view, n)[1]["tokens"] + self.extras

    def _v0(self, view: list[Event], n: int) -> tuple[list[Message], dict[str, Any]]:
        events = list(view)
        end = self.ends[n]
        first_system = next((e for e in self.events[:end] if e.kind == "system"), None)
        first_user = next((e for e in self.events[:end] if e.kind == "user_message"), None)
        if first_system is not None and not any(e.kind == "system" for e in events):
            events.insert(0, first_system)
        # OpenHands always has its system prompt at position 0 (it makes one when missing), so
        # the initial user message belongs at 1; without any system message ctxsim has no
        # text to put there and checks the first position instead [ctxsim's reading].
        slot = 1 if events and events[0].kind == "system" else 0
        inserted = False
        if first_user is not None and events and (
                len(events) == slot or events[slot].kind != "user_message"):
            events.insert(slot, first_user)
            inserted = True
        walk = self._walk(events)
        return walk.out, {"dropped_groups": len(walk.pending), "inserted_initial_user": inserted,
                          "tokens": walk.tokens}

    def _walk(self, events: list[Event]) -> _Walk:
        """`ConversationMemory.process_events` over `events`, resumed from the last checkpoint
        of the previous walk that lies before the first event that differs.

        Every group it emits is complete (its assistant message, then a result for each of
        its calls), so OpenHands' `_filter_unmatched_tool_calls` has nothing to remove here."""
        # A call walks the view before condensing (the request check) and the condensed one:
        # the last few walks are kept, and the one sharing the longest prefix is resumed.
        walks: list[_Walk] = self.memo.setdefault("walks", [])
        walk = _Walk(events)
        start = 0
        best = max(((first_difference(w.events, events), w) for w in walks),
                   key=lambda x: x[0], default=None)
        if best is not None:
            same, old = best
            mark = next((c for c in reversed(old.marks) if c[0] <= same), None)
            if mark is not None:
                start = walk.restore(old, mark)
        for pos in range(start, len(events)):
            if pos % CHECKPOINT == 0:
                walk.checkpoint(pos)
            e = events[pos]
            if e.kind in PLAIN_KINDS:
                self._emit(walk, self.h[e.message])
            elif e.kind in ("masked", "summary"):
                self._emit(walk, self._event_message(e))
            elif e.kind == "action":
                if e.message not in walk.pending:
                    walk.pending[e.message] = None
                    for c in self.h[e.message].tool_calls:
                        walk.waiting[c.id] = e.message
                self._complete(walk, e.message)
            else:
                m = self.h[e.message]
                walk.stored[m.tool_call_id] = m
                g = walk.waiting.get(m.tool_call_id)
                if g is not None:
                    self._complete(walk, g)
        walks.insert(0, walk)
        del walks[WALKS_KEPT:]
        return walk

    def _complete(self, walk: _Walk, g: int) -> None:
        calls = self.h[g].tool_calls
        if g in walk.pending and all(c.id in walk.stored for c in calls):
            del walk.pending[g]
            self._emit(walk, self.h[g])
            for c in calls:
                walk.waiting.pop(c.id, None)
                self._emit(walk, walk.stored.pop(c.id))

    def _emit(self, walk: _Walk, m: Message) -> None:
        spaced = m.role == "user" and walk.last_role == "user"
        m = self._shape(m, spaced)
        walk.out.append(m)
        walk.tokens += self.cost(m)
        walk.last_role = m.role

    def _shape(self, m: Message, spaced: bool) -> Message:
        """`_apply_user_message_formatting` then `truncate_content`, once per message."""
        key = (id(m), spaced)
        hit = self.shaped.get(key)
        if hit is not None and hit[0] is m:
            return hit[1]
        out = m.with_content(b"\n\n" + m.content) if spaced else m
        out = self._truncate(out)
        self.shaped[key] = (m, out)
        return out

    def _plain(self, view: list[Event]) -> tuple[list[Message], dict[str, Any]]:
        first_seen: dict[int, int] = {}
        calls: dict[int, set[int]] = {}
        masked: set[int] = set()
        summary: tuple[int, Event] | None = None
        for pos, e in enumerate(view):
            if e.kind == "summary":
                summary = (pos, e)
                continue
            first_seen.setdefault(e.message, pos)
            if e.kind == "action":
                calls.setdefault(e.message, set()).add(e.call)
            elif e.kind == "masked":
                masked.add(e.message)
        out: list[Message] = []
        placed = summary is None
        for i in sorted(first_seen):
            if not placed and first_seen[i] > summary[0]:  # type: ignore[index]
                out.append(self._event_message(summary[1]))  # type: ignore[index]
                placed = True
            m = self.h[i]
            if m.role == "assistant" and m.tool_calls:
                kept = tuple(c for k, c in enumerate(m.tool_calls) if k in calls.get(i, ()))
                m = m if len(kept) == len(m.tool_calls) else replace(m, tool_calls=kept)
            elif i in masked:
                m = m.with_content(MASKED.encode())
            out.append(m)
        if not placed:
            out.append(self._event_message(summary[1]))  # type: ignore[index]
        return out, {"dropped_groups": 0, "inserted_initial_user": False}

    def _truncate(self, m: Message) -> Message:
        if self.max_chars < 0 or not (m.role == "tool" or m.meta.get("kind") in (
                "masked_observation", PLACEHOLDER_KIND, "condensation_summary")):
            return m
        if len(m.content) <= self.max_chars:  # never more code points than bytes
            return m
        text = decode_for_display(m.content)
        cut = truncate_content(text, self.max_chars)
        return m if cut == text else m.with_content(cut.encode("utf-8"))


CHECKPOINT = 128  # events between two saved states of the assembly walk
WALKS_KEPT = 3


@dataclass
class _Walk:
    """The state of one assembly walk, with checkpoints to resume a later walk from."""

    events: list[Event]
    out: list[Message] = field(default_factory=list)
    tokens: int = 0
    pending: dict[int, None] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)
    stored: dict[str, Message] = field(default_factory=dict)
    last_role: str = ""
    marks: list[tuple[Any, ...]] = field(default_factory=list)

    def checkpoint(self, pos: int) -> None:
        self.marks.append((pos, len(self.out), self.tokens, dict(self.pending),
                           dict(self.waiting), dict(self.stored), self.last_role))

    def restore(self, old: _Walk, mark: tuple[Any, ...]) -> int:
        pos, n_out, tokens, pending, waiting, stored, last_role = mark
        self.out = old.out[:n_out]
        self.tokens, self.last_role = tokens, last_role
        self.pending, self.waiting, self.stored = dict(pending), dict(waiting), dict(stored)
        self.marks = [c for c in old.marks if c[0] < pos]
        return pos


def first_difference(a: Sequence[Any], b: Sequence[Any], limit: int | None = None) -> int:
    """The first position where `a` and `b` hold different values (block-wise, in C)."""
    n = min(len(a), len(b), len(a) if limit is None else limit)
    i = 0
    while i < n:
        j = min(i + 64, n)
        if a[i:j] != b[i:j]:
            return next(k for k in range(i, j) if a[k] != b[k])
        i = j
    return n



def _filter_unmatched(messages: list[Message]) -> tuple[list[Message], int]:
    """OpenHands `_filter_unmatched_tool_calls`: results need a kept call and calls a kept
    result; an assistant message left without calls goes, even with text."""
    call_ids = {c.id for m in messages if m.role == "assistant" for c in m.tool_calls}
    result_ids = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[Message] = []
    dropped = 0
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id in call_ids:
                out.append(m)
        elif m.role == "assistant" and m.tool_calls:
            kept = tuple(c for c in m.tool_calls if c.id in result_ids)
            if not kept:
                dropped += 1
                continue
            out.append(m if len(kept) == len(m.tool_calls) else replace(m, tool_calls=kept))
        else:
            out.append(m)
    return out, dropped

