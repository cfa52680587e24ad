"""The call view's alignment: what one call sent beside the raw history, message by message.

Pure Python over the engine's `CallResult` (no Django). A call in the middle of a 16,000-call
session sends some 28,000 messages, and a step to it is one request (issue 31): the alignment
decides every row's status, origin and tokens with a few dictionary lookups and identity
tests per row (unchanged messages are the very objects of the raw history, messages rewritten
at earlier calls those of the history the call started from), and makes a row's whole
`MessageRow` (its stage, diff, tool name, spill) only when it is read: the page renders a few
dozen rows and folds the rest. A step to the next call starts from the last view
(`ctxsim.replays.view_memo`): the rows it showed as the very same messages keep what depends
on the message alone.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import and_, attrgetter, contains, gt, is_, is_not, itemgetter, not_, or_
from typing import Any, overload

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult
from ctxsim.replays.content_diff import ContentDiff, content_diff
from ctxsim.replays.view_memo import ViewMemo, by_origin

STATUSES = ("unchanged", "rewritten", "spilled", "removed", "injected")
_origin = attrgetter("origin")
_content = attrgetter("content")
_role = attrgetter("role")


@dataclass
class MessageRow:
    """One row of the call view."""

    status: str
    message: Message  # what was sent (for removed rows: the raw message)
    raw: Message | None
    sent_position: int | None
    stage: str = ""  # the stage that changed, removed or injected it
    tokens: int = 0
    raw_tokens: int = 0
    tool_name: str = ""
    spill: Any = None  # the spill record whose path the preview names
    diff: ContentDiff | None = None
    # Rewritten before this call (an earlier call's persistent stage, or the dispatch cap) and
    # sent as this call's stages found it; for a removed row, removed at an earlier call.
    carried: bool = False

    @property
    def origin(self) -> int | None:
        return self.message.origin


def _naming(rows: list[int], messages: Sequence[Message],
            records: Sequence[Any]) -> dict[int, Any]:
    """For each of `rows` whose message names the path of one of `records`, the first such
    record. A late call carries thousands of rewritten rows: each path is looked for in all
    of their contents in C (`map(contains, ...)`), not row by row in Python."""
    contents = list(map(_content, map(messages.__getitem__, rows)))
    found: dict[int, Any] = {}
    for record in records:
        path = record.path.encode("utf-8", "surrogatepass")
        for i in compress(rows, map(contains, contents, repeat(path))):
            found.setdefault(i, record)
    return found


def _head(view: CallView | None, column: str, n: int) -> list[Any]:
    """The first `n` entries of one of `view`'s columns (none without a view)."""
    values = getattr(view, column) if view is not None and n else None
    return values[:n] if values is not None else []


def _kept_statuses(sent: list[Message], started_for: list[Message | None],
                   kept: list[str]) -> tuple[list[str], list[bool]]:
    """The first rows' statuses and carried flags, given their statuses in the last view that
    showed them as these very messages beside the same raw ones: an unchanged or injected row
    stays so; a rewritten (or spilled) one is rewritten still, and carried when it is what
    this call started from."""
    statuses = list(map(_CARRIED_AS.get, kept, kept))
    rewritten = list(map("rewritten".__eq__, statuses))
    carried = list(map(and_, rewritten, map(is_, sent, started_for)))
    for i in list(compress(range(len(kept)), map(and_, rewritten, map(not_, carried)))):
        before = started_for[i]
        carried[i] = before is not None and not _changed(before, sent[i])
    return statuses, carried


_CARRIED_AS = {"spilled": "rewritten"}  # a row spilled at an earlier call, carried since


def _changed(a: Message, b: Message) -> bool:
    return a is not b and (a.content != b.content or a.tool_calls != b.tool_calls)


def tools_of(message: Message, tool_name: str) -> tuple[str, ...]:
    """The tool names a row is about: the tool it answers, the tools it calls."""
    names = [tool_name] if tool_name else []
    names += [call.name for call in message.tool_calls]
    return tuple(dict.fromkeys(n for n in names if n))


class CallView:
    """Every row of one call. Per row, for all of them: `statuses`, `carried`, `messages`
    (what is shown: the sent message, or the raw one for a removed row), `origins`, `roles`,
    `weights` (its tokens, or its raw tokens when it sends none: what a fold counts) and
    `tool_names()`; `counts` by status. `rows[i]` is the row's whole `MessageRow`, made when
    read. `memo` is kept with the replay between its calls' views (the tools of each message
    it showed)."""

    def __init__(self, call: CallResult, cost: Callable[[Message], int],
                 capped: set[int], costs: Callable[[list[Message]], list[int]],
                 memo: ViewMemo | None = None) -> None:
        self._call, self._cost, self._capped = call, cost, capped
        # The memo is the replay's, which keeps this view as its last one: held weakly, so the
        # two make no cycle and a dropped replay's memo and view go with reference counting
        # (issue 31: cycles left every dropped replay to a full collection, a 0.5 s pause of
        # a busy web process). Whoever reads the view holds the memo meanwhile
        # (`services.CallDetail`); a view made without one owns its memo.
        if memo is None:
            memo = self._own_memo = ViewMemo()
        self._memo_ref = weakref.ref(memo)
        raw_by_origin = memo.raw_by_origin(call.raw_history)
        started = memo.started_by_origin(call.input_history)
        sent = list(call.sent)
        # The last view of this replay showed most of these rows as the very same messages (a
        # step to the next call sends the history it sent and a few more): what depends only
        # on the message (origin, role, raw message, tokens, tools) is that view's.
        last = memo.last[1] if memo.last is not None else None
        kept = last.same_rows(sent) if last is not None else 0
        new = sent[kept:]
        sent_origins = _head(last, "origins", kept) + list(map(_origin, new))
        removed = sorted(raw_by_origin.keys() - set(sent_origins))
        # Most rows are the very raw message (unchanged) or the very message the call started
        # from (rewritten at an earlier call, carried): told apart by identity, in C.
        raw_for = _head(last, "_raws", kept) + list(map(raw_by_origin.get, sent_origins[kept:]))
        started_for = list(map(started.get, sent_origins))
        statuses, carried, spilled = self._statuses(sent, raw_for, started_for, call,
                                                    _head(last, "statuses", kept))
        weights = _head(last, "weights", kept) + self._weights(new, raw_for[kept:], costs)
        roles = _head(last, "roles", kept) + list(map(_role, new))
        self._tools_kept = _head(last, "_tools", kept)
        self._positions: list[int | None] = list(range(len(sent)))
        self.removed = len(removed)
        if removed:
            sent, raw_for, statuses, carried, weights, spilled = self._merge(
                sent, sent_origins, raw_for, statuses, carried, weights, spilled,
                [raw_by_origin[o] for o in removed], started, costs)
            sent_origins, roles = list(map(_origin, sent)), list(map(_role, sent))
            self._tools_kept = []
        self.messages, self.statuses, self.carried = sent, statuses, carried
        self._raws, self._spilled = raw_for, spilled
        self.origins: list[int | None] = sent_origins
        self.roles: list[str] = roles
        self.counts = dict.fromkeys(STATUSES, 0)
        self.counts.update(Counter(statuses))
        self.weights = weights
        self._stage_maps: list[dict[int, Message] | None] | None = None
        self._tools: list[tuple[str, ...]] | None = None
        self._names: dict[str, str] | None = None
        self._raw_by_origin = raw_by_origin
        self._rows: dict[int, MessageRow] = {}
        self.spill_records: Mapping[str, Any] | None = None

    def _new_statuses(self, sent: list[Message], raw_for: list[Message | None],
                      started_for: list[Message | None]) -> tuple[list[str], list[bool]]:
        """The statuses and carried flags of rows not seen before. Python work goes to the
        messages changed at this call only: a carried one (the very message the call started
        from) is told rewritten or not by the memo of its earlier calls."""
        same = list(map(is_, sent, raw_for))
        statuses = list(map({True: "unchanged", False: "rewritten"}.__getitem__, same))
        carried = list(map(gt, map(is_, sent, started_for), same))  # and not the raw one
        at = list(compress(range(len(sent)), carried))
        changed = self._memo.changed
        messages = list(map(sent.__getitem__, at))
        # A hit by id is that very message: the memo holds it, so its id is not reused.
        hits = list(map(changed.get, map(id, messages)))
        if None in hits:
            for k in [k for k, hit in enumerate(hits) if hit is None]:
                m = messages[k]
                hits[k] = changed[id(m)] = (m, _changed(raw_for[at[k]], m))  # type: ignore[arg-type]
        for i in compress(at, map(not_, map(itemgetter(1), hits))):  # type: ignore[arg-type]
            statuses[i], carried[i] = "unchanged", False
        for i in list(compress(range(len(sent)), map(not_, map(or_, same, carried)))):
            m, raw = sent[i], raw_for[i]
            if raw is None:
                statuses[i] = "injected"
            elif not _changed(raw, m):
                statuses[i] = "unchanged"
            else:
                before = started_for[i]
                carried[i] = before is not None and not _changed(before, m)
        return statuses, carried

    def same_rows(self, sent: Sequence[Message]) -> int:
        """How many first rows of this view are `sent`'s first messages, the very objects (0
        when this view has removed rows among its sent ones)."""
        if self.removed:
            return 0
        n = min(len(self.messages), len(sent))
        return next(compress(range(n), map(is_not, self.messages, sent)), n)

    def _weights(self, sent: list[Message], raw_for: list[Message | None],
                 costs: Callable[[list[Message]], list[int]]) -> list[int]:
        """Each sent row's tokens; a row sending nothing weighs its raw tokens."""
        weights = costs(sent)
        for i in list(compress(range(len(weights)), map(not_, weights))):
            raw = raw_for[i]
            if raw is not None:
                weights[i] = self._cost(raw)
        return weights

    def _statuses(self, sent: list[Message], raw_for: list[Message | None],
                  started_for: list[Message | None], call: CallResult, kept: list[str]):
        """Each sent message's status and carried flag, and the spilled ones' records, given
        the statuses of the first rows that the last view showed as these very messages."""
        statuses, carried = _kept_statuses(sent, started_for, kept)
        more = self._new_statuses(sent[len(kept):], raw_for[len(kept):],
                                  started_for[len(kept):])
        statuses += more[0]
        carried += more[1]
        spilled: dict[int, Any] = {}
        if call.spills:
            # Rows this call's stages rewrote: a carried one is the very message the call
            # started from, made before this call wrote its spill files (dispatch caps spill
            # before the call too), so it names none of them — and a late call carries
            # thousands, 43 MB at 16,000 calls, that a search would read at every step.
            rewritten = list(compress(range(len(sent)), map(gt, map("rewritten".__eq__,
                                                                    statuses), carried)))
            for i, record in _naming(rewritten, sent, call.spills).items():
                statuses[i], spilled[i] = "spilled", record
        return statuses, carried, spilled

    def _merge(self, sent, sent_origins, raw_for, statuses, carried, weights, spilled,
               removed: list[Message], started, costs):
        """The columns with the removed raw messages placed by origin among the sent ones
        (a removed row before the first sent message of a later origin)."""
        order: list[int] = []  # a sent message's position, or ~k for the k-th removed one
        r, n = 0, len(removed)
        for position, origin in enumerate(sent_origins):
            while r < n and origin is not None and removed[r].origin < origin:
                order.append(~r)
                r += 1
            order.append(position)
        order += [~k for k in range(r, n)]
        removed_weights = costs(removed)  # a removed row weighs its raw tokens
        self._positions = [p if p >= 0 else None for p in order]
        row_of = [i for i, p in enumerate(order) if p >= 0]
        return ([sent[p] if p >= 0 else removed[~p] for p in order],
                [raw_for[p] if p >= 0 else removed[~p] for p in order],
                [statuses[p] if p >= 0 else "removed" for p in order],
                # Gone from the history this call started from: removed at an earlier call.
                [carried[p] if p >= 0 else removed[~p].origin not in started for p in order],
                [weights[p] if p >= 0 else removed_weights[~p] for p in order],
                {row_of[p]: record for p, record in spilled.items()})

    def tool_names(self) -> list[tuple[str, ...]]:
        """Each row's tools (`tools_of`), from the memo for the messages it holds."""
        if self._tools is not None:
            return self._tools
        memo, canonical = self._memo.tools, self._memo.tool_tuples
        kept = len(self._tools_kept)  # the rows the last view showed as these very messages
        # A hit by id is that very message (the memo holds it, so its id is not reused): only
        # the misses, a few new messages per call, are read in Python.
        found = list(map(memo.get, map(id, self.messages[kept:])))
        if None in found:
            for k in [k for k, hit in enumerate(found) if hit is None]:
                m = self.messages[kept + k]
                names = self.tools(kept + k)
                found[k] = memo[id(m)] = (m, canonical.setdefault(names, names))
        self._tools = self._tools_kept + list(map(itemgetter(1), found))  # type: ignore[arg-type]
        return self._tools

    @property
    def _memo(self) -> ViewMemo:
        memo = self._memo_ref()
        if memo is None:
            raise RuntimeError("a call view was read after its replay's memo was let go")
        return memo

    @property
    def rows(self) -> Sequence[MessageRow]:
        """Every row, each made when read (and kept): a window made when asked for, so the view
        and its rows make no cycle (a dropped replay's last view goes with reference counting)."""
        return _Rows(self)

    def __len__(self) -> int:
        return len(self.statuses)

    @property
    def rows_made(self) -> int:
        """How many rows were read whole so far (a step renders a few dozen)."""
        return len(self._rows)

    @property
    def stage_maps_made(self) -> int:
        """How many stages' by-origin maps a row's walk built so far (`_stage_map`)."""
        return sum(map(bool, self._stage_maps or ()))

    def tool_name(self, i: int) -> str:
        """The tool a tool result answers, named by the raw history's tool calls."""
        m = self.messages[i]
        if m.role != "tool":
            return ""
        if self._names is None:
            self._names = self._memo.names_of(self._call.raw_history)
        return self._names.get(m.tool_call_id, "")  # type: ignore[arg-type]

    def tools(self, i: int) -> tuple[str, ...]:
        m = self.messages[i]
        if m.role != "tool" and not m.tool_calls:
            return ()
        return tools_of(m, self.tool_name(i))

    def _stage(self, i: int) -> str:
        """The stage that rewrote or removed row `i` at this call (its first change, stage by
        stage from the raw message), or that injected it."""
        status, origin = self.statuses[i], self.origins[i]
        if status == "injected":
            return "pairing" if self.messages[i].role == "tool" else "anchor"
        if status == "unchanged" or origin is None:
            return ""
        before = self._raw_by_origin.get(origin)
        for k, run in enumerate(self._call.stages):
            after = self._stage_map(k).get(origin)
            if before is not None:
                if after is None and status == "removed":
                    return run.stage
                if after is not None and status != "removed" and _changed(before, after):
                    return "tool_cap" if origin in self._capped else run.stage
            before = after
        return "tool_cap" if status != "removed" and origin in self._capped else ""

    def _stage_map(self, k: int) -> dict[int, Message]:
        """`by_origin` of stage `k`'s history, made when a row's walk reaches it; a stage that
        left the history as it found it (the very messages) shares the map before it."""
        maps = self._stage_maps
        if maps is None:
            maps = self._stage_maps = [None] * len(self._call.stages)
        found = maps[k]
        if found is None:
            history = self._call.stages[k].history
            previous = self._call.stages[k - 1].history if k else None
            if previous is not None and len(previous) == len(history) \
                    and all(map(is_, previous, history)):
                found = self._stage_map(k - 1)
            else:
                found = by_origin(history)
            maps[k] = found
        return found

    def row(self, i: int) -> MessageRow:
        made = self._rows.get(i)
        if made is not None:
            return made
        status, m, raw = self.statuses[i], self.messages[i], self._raws[i]
        removed = status == "removed"
        row = MessageRow(status=status, message=m, raw=raw, sent_position=self._positions[i],
                         stage=self._stage(i), tokens=0 if removed else self._cost(m),
                         raw_tokens=self._cost(raw) if raw is not None else 0,
                         tool_name=self.tool_name(i), carried=self.carried[i])
        spill = self._spilled.get(i)
        if spill is not None:
            row.spill = (spill if self.spill_records is None
                         else self.spill_records.get(spill.name))
        if status in ("rewritten", "spilled") and not row.carried and raw is not None:
            row.diff = content_diff(raw.content, m.content)  # a carried row's is asked for
        self._rows[i] = row
        return row


class _Rows(Sequence[MessageRow]):
    """A call view's rows, each made when read (and kept)."""

    def __init__(self, view: CallView) -> None:
        self._view = view

    def __len__(self) -> int:
        return len(self._view)

    @overload
    def __getitem__(self, index: int) -> MessageRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[MessageRow]: ...
    def __getitem__(self, index: int | slice) -> MessageRow | list[MessageRow]:
        n = len(self._view)
        if isinstance(index, slice):
            return [self._view.row(i) for i in range(*index.indices(n))]
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("call view row out of range")
        return self._view.row(index)

    def __iter__(self) -> Iterator[MessageRow]:
        return (self._view.row(i) for i in range(len(self._view)))


def call_view(
    call: CallResult,
    cost: Callable[[Message], int],
    capped_at_dispatch: Iterable[int] = (),
    costs: Callable[[list[Message]], list[int]] | None = None,
    memo: ViewMemo | None = None,
) -> CallView:
    """Align what was sent at one call with the raw history, message by message.

    `cost` is the replay's own measure of a message (`Replay.cost`; `costs`, of many at once,
    `Replay.costs`): every message a call shows was measured by the replay that made it, so a
    view never counts one again (issue 31: a step at 16,000 calls spent 27.6 of 28.3 s
    recounting raw messages).

    Invariant: every raw message appears exactly once (sent as is, rewritten, spilled or
    removed) and every sent message without an origin is marked injected.
    """
    each = costs if costs is not None else (lambda ms: [cost(m) for m in ms])
    capped = capped_at_dispatch if isinstance(capped_at_dispatch, set) else set(capped_at_dispatch)
    return CallView(call, cost, capped, each, memo)
