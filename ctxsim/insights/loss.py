"""Information lost: later references to results the pipeline dropped (issue 10).

A tool result is *dropped* at a call when what was sent there does not hold it intact: it was
removed, spilled (only a preview left), truncated, summarised or replaced by a placeholder.
Two kinds of evidence that the agent needed what went missing, both found in the answer of a
call where the result was dropped:
- a **re-read**: the answer calls the same tool with the same arguments again;
- a **lost reference**: the answer (text or tool-call arguments) mentions an identifier — a
  path, a function name, an error name, a number of 6+ digits — that the dropped result held
  and that nothing sent at that call contains (so the agent cannot have read it there).
Each dropped result counts at most one re-read, and each identifier one lost reference.
A word-like identifier (a name, not a path, file or number) that occurs in many of the session's
results — `useState`, `onClick` in a React project — is generic: mentioning it says nothing
about one dropped result, so it is never a lost reference.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult

from .cache import PromptIndex, shared_prefix
from .words import WordIndex

_EXT = (r"py|pyi|go|js|mjs|ts|tsx|jsx|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|md|rst|json|"
        r"yaml|yml|toml|ini|cfg|sh|sql|txt|html|css|lock|xml|proto")
IDENTIFIER = re.compile(
    r"(?P<path>(?:[\w.-]*/)+[\w.-]*\w(?:\.\w+)?)"  # a/b/c.py, /repo/x, ./run.sh
    rf"|(?P<file>\b[\w-]+\.(?:{_EXT})\b)"  # main.go
    r"|(?P<error>\b[A-Z][A-Za-z]*(?:Error|Exception)\b)"  # KeyError, ValueError
    r"|(?P<number>\b\d{6,}\b)"  # ids, offsets, big counts
    r"|(?P<func>\b[A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]+\b|\b[a-z]+[A-Z][A-Za-z0-9]+\b"
    r"|\b[A-Za-z_]\w{2,}(?=\())",  # snake_case, camelCase, name(
    re.ASCII,
)
# Too common to say anything about what an agent remembered.
STOP = frozenset({"http://", "https://", "/", "//", "./", "../", "__init__", "__main__"})
# A name found in at least this many tool results of the session (and this share of them) is
# generic. Four keeps a name a few related results share (a function read, grepped, edited).
GENERIC_MIN_RESULTS = 4
GENERIC_SHARE = 0.1


def identifiers(text: str) -> set[str]:
    """Identifier-like tokens of a text: paths, file names, error names, long numbers, and
    snake_case / camelCase / called names."""
    out = set()
    for match in IDENTIFIER.finditer(text):
        token = match.group(0).rstrip(".")
        if len(token) >= 4 and token not in STOP and not token.endswith(":"):
            out.add(token)
    return out


def call_key(name: str, arguments: str) -> tuple[str, str]:
    """A tool call's identity for re-reads: its name and its arguments as canonical JSON."""
    try:
        canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        canonical = arguments.strip()
    return name, canonical


@dataclass(frozen=True)
class Drop:
    origin: int  # the transcript index of the dropped result
    call: int  # the first call where it was not sent intact
    how: str  # removed | spilled | truncated | replaced
    tool: str


@dataclass(frozen=True)
class ReRead:
    call: int  # the call whose answer repeated the tool call
    answer: int  # transcript index of that answer
    dropped: Drop
    arguments: str


@dataclass(frozen=True)
class LostReference:
    call: int
    answer: int
    identifier: str
    dropped: Drop


@dataclass
class LossReport:
    drops: list[Drop] = field(default_factory=list)
    rereads: list[ReRead] = field(default_factory=list)
    lost: list[LostReference] = field(default_factory=list)


def _how(raw: Message, sent: Message | None, spill_paths: Sequence[bytes]) -> str:
    if sent is None:
        return "removed"
    if any(p in sent.content for p in spill_paths):
        return "spilled"
    head = raw.content[:64]
    if head and sent.content.startswith(head):
        return "truncated"
    return "replaced"


class LossTracker:
    """Feed every call of one replay in order with `step`; read `report` at the end.

    A call's work is proportional to what changed since the previous call (issue 21): the raw
    history only grows, and the sent prompt changes after its first changed message (the
    replay's `sent_kept`), so only the new results and the results whose origin was sent
    differently are looked at again. The results not sent intact are kept as a set.
    """

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
        # identifier -> its search state in `_index`, the words and lines holding it, and the
        # origins of the results holding it; grown lazily.
        self._containing: dict[str, tuple[list[int], list[int], list[int], list[int]]] = {}
        self._index = WordIndex()
        # How many results seen are the session's first results (same contents, in order),
        # and the index of the whole session with what was looked up in it.
        self._aligned = 0
        self._session_index: WordIndex | None = None
        self._session_hits: dict[str, list[int]] = {}
        self.spill_dirs: set[bytes] = set()
        self.report = LossReport()
        self._results = [m for m in messages if m.role == "tool"]
        self._generic_at = max(GENERIC_MIN_RESULTS, -(-len(self._results) * GENERIC_SHARE // 1))
        self._generic: dict[str, bool] = {}
        # The previous call's prompt, and where each origin is in it.
        self._sent = PromptIndex()
        self._raw_history: Sequence[Message] = ()
        self._positions: dict[int, list[int]] = {}  # origin -> raw positions of its results
        self._by_key: dict[tuple[str, str], list[int]] = {}  # call key -> raw positions
        self._dropped: set[int] = set()  # raw positions of results not sent intact
        self._dropped_origins: dict[int, int] = {}  # origin -> how many of those

    def step(self, call: CallResult) -> None:
        for s in call.spills:
            self.spill_dirs.add(s.path.rsplit("/", 1)[0].encode("utf-8", "surrogatepass"))
        raw_history = call.raw_history
        known = len(self._raw_history)
        if len(raw_history) < known or (known and raw_history[known - 1]
                                         is not self._raw_history[known - 1]):
            self._forget()  # not the next call of the same replay: start over
            known = 0
        touched = self._resend(call)
        fresh = []
        for j in range(known, len(raw_history)):
            raw = raw_history[j]
            if raw.role != "tool" or raw.origin is None:
                continue
            if raw.origin not in self._raw:
                self._raw[raw.origin] = raw
                self._seen.append(raw)
                results = self._results
                if self._aligned == len(self._seen) - 1 and self._aligned < len(results) and (
                        results[self._aligned].content == raw.content):
                    self._aligned += 1
            first = self._raw[raw.origin]
            self._positions.setdefault(raw.origin, []).append(j)
            if first.tool_call_id in self.calls:
                self._by_key.setdefault(self.calls[first.tool_call_id], []).append(j)
            fresh.append(j)
        self._raw_history = raw_history
        for origin in touched:
            fresh.extend(j for j in self._positions.get(origin, ()) if j < known)
        newly = []
        for j in fresh:
            raw = raw_history[j]
            sent = self._sent_as(raw.origin)
            intact = sent is not None and (sent is raw or sent == raw)
            if intact:
                if j in self._dropped:
                    self._dropped.discard(j)
                    self._count(raw.origin, -1)
            elif j not in self._dropped:
                self._dropped.add(j)
                self._count(raw.origin, 1)
                newly.append(j)
        for j in sorted(newly):  # in raw order, as a scan of the history would find them
            raw = raw_history[j]
            if raw.origin is None or raw.origin in self.first_drop:
                continue  # (every tracked result has its origin)
            name = self.calls.get(raw.tool_call_id, ("", ""))[0]
            drop = Drop(raw.origin, call.call_index,
                        _how(raw, self._sent_as(raw.origin), tuple(self.spill_dirs)), name)
            self.first_drop[raw.origin] = drop
            self.report.drops.append(drop)
        answer_index = call.response_input_index
        if not self._dropped or answer_index is None:
            return
        answer = self.messages[answer_index]
        self._rereads(call, answer_index, answer)
        self._lost_references(call, answer_index, answer)

    def _forget(self) -> None:
        self._sent, self._raw_history = PromptIndex(), ()
        self._positions, self._by_key = {}, {}
        self._dropped, self._dropped_origins = set(), {}

    def _resend(self, call: CallResult) -> set[int]:
        """Take this call's prompt; returns the origins it may send differently: those of the
        messages removed or added (a sliding window keeps the rest as it was)."""
        index, sent = self._sent, call.sent
        old = index.messages
        kept = call.sent_kept if call.sent_kept is not None else 0
        position = shared_prefix(old, sent, min(kept, len(old), len(sent)))
        touched: set[int] = set()
        for _start, _end, put, removed in index.take(sent, position):
            touched.update(o for o in map(_origin, (*removed, *put)) if o is not None)
        return touched

    def _sent_as(self, origin: int | None) -> Message | None:
        """What this call sent for a transcript message (its last copy), None: nothing."""
        return self._sent.last(origin)

    def _count(self, origin: int | None, by: int) -> None:
        if origin is None:
            return
        left = self._dropped_origins.get(origin, 0) + by
        if left:
            self._dropped_origins[origin] = left
        else:
            del self._dropped_origins[origin]

    def _rereads(self, call: CallResult, answer_index: int, answer: Message) -> None:
        raw_history = self._raw_history
        for c in answer.tool_calls:
            places = self._by_key.get(call_key(c.name, c.arguments))
            if not places:
                continue
            for j in places:
                origin = raw_history[j].origin
                if j in self._dropped and origin not in self.reread_done:
                    assert origin is not None  # a seen result has its origin
                    self.reread_done.add(origin)
                    self.report.rereads.append(ReRead(call.call_index, answer_index,
                                                      self.first_drop[origin], c.arguments))
            # A result re-read once never counts again: keep only the others.
            places[:] = [j for j in places if raw_history[j].origin not in self.reread_done]

    def _lost_references(self, call: CallResult, answer_index: int, answer: Message) -> None:
        mentioned = identifiers(answer.text)
        for c in answer.tool_calls:
            mentioned |= identifiers(c.arguments)
        # Search the answer's few identifiers in the dropped results (fast substring search)
        # rather than extracting every identifier of every result.
        dropped = self._dropped_origins
        for ident in sorted(mentioned - self.lost_done):
            needle = ident.encode("utf-8")
            if self._is_generic(ident, needle):
                continue
            source = next((self.first_drop[o] for o in self._holding(ident, needle)
                           if o in dropped), None)
            if source is None or _sent_mentions(call.sent, needle):
                continue
            self.lost_done.add(ident)
            self.report.lost.append(LostReference(call.call_index, answer_index, ident, source))

    def _in_session(self, ident: str, needle: bytes) -> list[int]:
        """Indices in `_results` (every tool result of the session) of those containing
        `needle`, from an index of the whole session built once, when first needed."""
        found = self._session_hits.get(ident)
        if found is None:
            index = self._session_index
            if index is None:
                index = self._session_index = WordIndex()
                for m in self._results:
                    index.add(m.content)
            found = self._session_hits[ident] = index.search(needle, [0, 0, 0], [], [])
        return found

    def _holding(self, ident: str, needle: bytes) -> list[int]:
        """Origins of the tool results seen so far whose content contains `needle`, in the
        order they were seen (issue 21). The results seen are those of the session, in
        order, as long as their contents are (`_aligned`): then from the session's index;
        else from an index of the seen results (`WordIndex`), grown only by what was seen since
        this identifier was last looked up."""
        seen, index = self._seen, self._index
        if not WordIndex.searchable(needle):  # never for an identifier: searched the plain way
            return [m.origin for m in seen if needle in m.content and m.origin is not None]
        if self._aligned == len(seen):
            hits = self._in_session(ident, needle)
            return [o for o in (seen[j].origin for j in islice(hits, bisect_left(hits, len(seen))))
                    if o is not None]
        while index.size < len(seen):
            index.add(seen[index.size].content)
        memo = self._containing.get(ident)
        if memo is None:
            memo = self._containing[ident] = ([0, 0, 0], [], [], [])
        for j in index.search(needle, *memo[:3]):
            origin = seen[j].origin
            if origin is not None:  # a seen result has its origin
                memo[3].append(origin)
        return memo[3]

    def _is_generic(self, ident: str, needle: bytes) -> bool:
        """A name (not a path, file or number) found in many of the session's results."""
        known = self._generic.get(ident)
        if known is None:
            known = False
            if "/" not in ident and "." not in ident and not (ident.isascii() and ident.isdigit()):
                if WordIndex.searchable(needle):
                    known = len(self._in_session(ident, needle)) >= self._generic_at
                else:  # never for an identifier: counted the plain way
                    count = 0
                    for m in self._results:
                        if needle in m.content:
                            count += 1
                            if count >= self._generic_at:
                                known = True
                                break
            self._generic[ident] = known
        return known


_origin = attrgetter("origin")


def _sent_mentions(sent: Sequence[Message], needle: bytes) -> bool:
    for m in sent:
        if needle in m.content:
            return True
        if any(needle in c.arguments.encode("utf-8", "surrogatepass") for c in m.tool_calls):
            return True
    return False
