"""Microcompact (behaviour file §4; SPEC §2.2 rows 1–6 for the documented variant).

Ages tool results (and agent-feedback user messages) by the number of assistant messages after
them: a head/tail preview at `TurnsBeforeTruncate`, a one-line summary at `TurnsBeforeSummarize`,
plus the CCR recall suffix when the compression layer is on.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, overload

from ..history import frozen, with_changes
from ..messages import Message
from . import (
    ReplayFacts,
    StageContext,
    StageResult,
    changed_since,
    from_units,
    lit,
    to_units,
)

CCR_MARKER = re.compile(rb"<<ccr:([0-9a-f]{16})>>")
SUMMARY_WINDOW = 200
PREVIEW_GUARD = 100

# Go's strings.TrimSpace: Unicode White_Space (not U+001C–U+001F, not U+FEFF, not U+200B).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) + (
    "\u2028\u2029\u202f\u205f\u3000"
)
_LEADING_SPACE = re.compile(
    b"(?:" + b"|".join(re.escape(c.encode("utf-8")) for c in _GO_SPACE) + b")+"
)
_SPACE_BYTES = tuple(c.encode("utf-8") for c in _GO_SPACE)


def go_trim_space[U: (bytes, str)](s: U) -> U:
    """Go's `strings.TrimSpace` on bytes (invalid bytes are never space) or on text."""
    if isinstance(s, str):
        return s.strip(_GO_SPACE)
    lead = _LEADING_SPACE.match(s)
    start = lead.end() if lead else 0
    end = len(s)
    # Trailing spaces are peeled one encoded character at a time: a regex anchored at the end
    # would be retried at every position of a large result.
    while end > start:
        for space in _SPACE_BYTES:
            if s.endswith(space, start, end):
                end -= len(space)
                break
        else:
            break
    return s[start:end]


def content_type[U: (bytes, str)](s: U, documented: bool = False) -> str:
    """The TYPE of a summary. Implemented rules look only at the first 200 units for the
    `contains` checks and rank `import ` before Python/JS; the documented table does not."""
    t = go_trim_space(s)
    L = lambda x: lit(x, t)  # noqa: E731 - tiny local adapter between bytes and str literals
    if t.startswith(L("{")) or t.startswith(L("[")):
        return "JSON"
    rules: tuple[tuple[str, str], ...]
    if documented:
        rules = (("package ", "Go source"), ("def ", "Python source"),
                 ("function ", "JavaScript source"))
        window = t
    else:
        rules = (("package ", "Go source"), ("import ", "source code"),
                 ("def ", "Python source"), ("function ", "JavaScript source"))
        window = t[:SUMMARY_WINDOW]
    for needle, name in rules:
        if L(needle) in window:
            return name
    diff_prefixes = ("diff ", "---") if documented else ("diff ", "--- ")
    if any(t.startswith(L(p)) for p in diff_prefixes):
        return "diff"
    if t.startswith(L("commit ")):
        return "git log"
    return "text"


def format_size(n: int, documented: bool) -> str:
    if documented and n >= 1000:
        return f"{int(n / 1000 + 0.5)}K"
    return str(n)


# `summary` and `preview` give back the unit type they get, bytes or text (the replay calls them
# with either, as the profile's semantics decide).
@overload
def summary(s: bytes, documented: bool = False) -> bytes: ...
@overload
def summary(s: str, documented: bool = False) -> str: ...
def summary[U: (bytes, str)](s: U, documented: bool = False) -> U:
    lines = s.count(lit("\n", s)) + 1
    text = (
        f"[Old tool result cleared — {lines} lines, {format_size(len(s), documented)} chars, "
        f"{content_type(s, documented)}]"
    )
    return lit(text, s)


@overload
def preview(s: bytes, head: int, tail: int) -> bytes: ...
@overload
def preview(s: str, head: int, tail: int) -> str: ...
def preview[U: (bytes, str)](s: U, head: int, tail: int) -> U:
    """`truncateToolResultPreview`: unchanged up to H+T+100, else snapped head/tail + marker."""
    if len(s) <= head + tail + PREVIEW_GUARD:
        return s
    nl = lit("\n", s)
    h = s[:head]
    k = h.rfind(nl)
    if k > head // 2:
        h = h[: k + 1]
    t = s[len(s) - tail:] if tail > 0 else s[:0]
    k = t.find(nl)
    if 0 < k < tail // 2:
        t = t[k + 1:]
    omitted = len(s) - len(h) - len(t)
    return h + lit(f"\n[... {omitted} chars omitted from old tool result ...]\n", s) + t


def recall_suffix(original: bytes, stub: bytes, ccr_on: bool) -> bytes:
    """Markers of the original the stub lost; with CCR on, an unmarked original is archived."""
    markers, archive = RECALL_KEYS.of(original)
    keys = markers or ((archive,) if ccr_on else ())
    if not keys:
        return b""
    missing = [k for k in keys if b"<<ccr:" + k + b">>" not in stub]
    if not missing:
        return b""
    return (
        b"\n[full content recoverable via @recall"
        + b"".join(b" <<ccr:" + k + b">>" for k in missing)
        + b"]"
    )


class RecallKeys:
    """What `recall_suffix` reads of an original: its CCR markers in order of first
    appearance, or, for an unmarked one, its archive key (its SHA-256, 16 hex digits; empty
    for a marked one, which never reads it), kept by the original's bytes across replays.

    Every replay compacts the same results of a stored session again, each once: scanning
    and hashing their originals was a fifth of a warm 200-call `chatcli` replay (8 of 40 ms,
    446 originals of ~11 KB), and of the replays a web process runs to reach a call. Kept by
    the original object, not its bytes: the replays of a session a process holds see the very
    same objects, and looking an original up by its bytes hashed and compared all of them
    (0.5-0.8 s of a 16,000-call session's background replay, which finds none: replay-scale
    1.06 -> 1.36). An entry holds its original (so its id stays its own; mostly an object the
    loaded sessions and the token counter's cache hold anyway), so the memo is bounded by
    their bytes (`max_bytes`: a 16,000-call session's results fit; a replay of more finds
    none of its originals, the oldest having gone first, and pays only the bookkeeping) and
    skips an original larger than `max_item`. Thread-safe."""

    def __init__(self, max_bytes: int = 512 * 1024 * 1024, max_item: int = 1024 * 1024) -> None:
        self.max_bytes, self.max_item = max_bytes, max_item
        # id(original) -> (original, its keys)
        self._keys: OrderedDict[int, tuple[bytes, tuple[tuple[bytes, ...], bytes]]] = (
            OrderedDict())
        self._bytes = 0
        self._lock = threading.Lock()

    def of(self, original: bytes) -> tuple[tuple[bytes, ...], bytes]:
        hit = self._keys.get(id(original))
        if hit is not None and hit[0] is original:
            return hit[1]
        markers: list[bytes] = []
        if b"<<ccr:" in original:  # a memchr-speed scan first: most results hold none
            for key in CCR_MARKER.findall(original):
                if key not in markers:
                    markers.append(key)
        archive = b"" if markers else hashlib.sha256(original).hexdigest()[:16].encode()
        found = tuple(markers), archive
        if len(original) <= self.max_item:
            with self._lock:
                if id(original) not in self._keys:
                    self._keys[id(original)] = (original, found)
                    self._bytes += len(original)
                    while self._bytes > self.max_bytes:  # O(1) each, unlike a dict's first key
                        _, (oldest, _) = self._keys.popitem(last=False)
                        self._bytes -= len(oldest)
        return found

    def holds(self, original: bytes) -> bool:
        """Whether this very object's keys are kept."""
        hit = self._keys.get(id(original))
        return hit is not None and hit[0] is original


RECALL_KEYS = RecallKeys()


@contextmanager
def isolated_recall_keys() -> Iterator[None]:
    """Within the block the memo starts empty, as in a new process (a worker's task runs in
    one); the process's own comes back after it. For tests and benchmarks of a cold process:
    kept across one, it held a whole 16,000-call session's originals into the next replay."""
    global RECALL_KEYS
    saved = RECALL_KEYS
    RECALL_KEYS = RecallKeys(saved.max_bytes, saved.max_item)
    try:
        yield
    finally:
        RECALL_KEYS = saved


def _is_exempt(name: str, exempt: Sequence[str]) -> bool:
    low = name.lower()
    return any(e.lower() in low for e in exempt if e)


@dataclass
class _Candidates:
    """Results microcompact may still change (big enough, not exempt), with their turn number,
    kept between calls: the next history extends this one, so only new or rewritten messages
    are examined again. Results below the minimum never grow back, so they drop out for good.
    """

    source: Sequence[Message] = ()
    assistants: int = 0
    live: dict[int, int] = field(default_factory=dict)  # position -> turn number
    call_names: dict[str, str] = field(default_factory=dict)


def _is_candidate(m: Message) -> bool:
    return m.role == "tool" or (m.role == "user" and m.agent_feedback)


def _big_enough(m: Message, minimum: int, documented: bool) -> bool:
    if documented:
        return len(to_units(m.content, True)) > minimum
    return len(m.content) >= minimum


def _candidates(history: Sequence[Message], ctx: StageContext, minimum: int) -> _Candidates:
    documented = ctx.documented
    exempt = (ctx.params.get("exempt_tools") or ()) if documented else ()
    memo = ctx.memo
    idx: _Candidates | None = memo.get("candidates") if memo is not None else None
    start = 0
    if idx is not None and len(history) < len(idx.source):
        idx = None  # not an extension of the previous history: start over
    if idx is not None:
        for i in changed_since(idx.source, history, ctx):
            old, new = idx.source[i], history[i]
            # A rewritten call list or a moved message changes turns or names: start over.
            if old.role != new.role or new.role == "assistant" or exempt:
                idx = None
                break
            if _is_candidate(new) and _big_enough(new, minimum, documented):
                if i not in idx.live:  # newly big: its turn number is not known here
                    idx = None
                    break
            else:
                idx.live.pop(i, None)
        if idx is not None:
            start = len(idx.source)
    if idx is None:
        idx = _Candidates()
    for i in range(start, len(history)):
        m = history[i]
        if m.role == "assistant":
            idx.assistants += 1
            if exempt:
                for c in m.tool_calls:
                    idx.call_names[c.id] = c.name
        elif _is_candidate(m) and _big_enough(m, minimum, documented):
            if exempt and m.role == "tool" and _is_exempt(
                idx.call_names.get(m.tool_call_id, ""), exempt
            ):
                continue
            idx.live[i] = idx.assistants
    return idx


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Compact old results by age.

    Invariant: only `tool` and agent-feedback `user` messages change, only their content, and
    (implemented) nothing changes while `loop_turn` < TurnsBeforeTruncate.
    """
    documented = ctx.documented
    trunc_age = ctx.env("mc_turns_before_truncate")
    sum_age = ctx.env("mc_turns_before_summarize")
    head = ctx.env("mc_truncate_head_chars")
    tail = ctx.env("mc_truncate_tail_chars")
    minimum = ctx.env("mc_min_content_size")
    ccr_on = ctx.params.get("ccr", "on") == "on"
    report = {"skipped_early": False, "truncated": 0, "summarized": 0, "chars_saved": 0}
    idx = _candidates(history, ctx, minimum)
    result = frozen(history)
    rewritten: list[int] = []
    # The early exit is ChatCLI's code, not its documentation (SPEC §2.2 rows 1, 3).
    if not history or (not documented and ctx.loop_turn < trunc_age):
        report["skipped_early"] = True
    else:
        out: dict[int, Message] = {}
        for i in sorted(idx.live):
            age = idx.assistants - idx.live[i]
            if age < trunc_age and age < sum_age:
                continue
            m = history[i]
            units = to_units(m.content, documented)
            if age >= sum_age:
                stub = summary(units, documented)
                report["summarized"] += 1
            else:
                stub = preview(units, head, tail)
                report["truncated"] += 1
            new = from_units(stub) if stub is not units else m.content
            new += recall_suffix(m.content, new, ccr_on)
            size = len(units)
            report["chars_saved"] += size - (
                len(new) if not documented else len(new.decode("utf-8", "replace"))
            )
            if new != m.content:
                out[i] = m.with_content(new)
                rewritten.append(i)
                if not _big_enough(out[i], minimum, documented):
                    del idx.live[i]
        if out:
            result = with_changes(result, out)
    idx.source = result
    if ctx.memo is not None:
        ctx.memo["candidates"] = idx
    return StageResult(result, report, changed=tuple(rewritten))


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("truncated", 0) + report.get("summarized", 0)


def describe(report: Mapping[str, Any]) -> str:
    if report.get("skipped_early"):
        return "Skipped: ChatCLI does not microcompact in the first loop turns of a run."
    return (f"{report.get('truncated', 0)} result(s) truncated, {report.get('summarized', 0)} "
            f"summarized, {report.get('chars_saved', 0)} bytes saved.")


def quiet_note(facts: ReplayFacts) -> str | None:
    """Why a tier never fired: no run got old enough, no result was big enough, or (summarize
    tier) every result was already truncated below the minimum when it reached that age."""
    min_size = facts.env("mc_min_content_size")
    truncate_at = facts.env("mc_turns_before_truncate")
    summarize_at = facts.env("mc_turns_before_summarize")
    max_turn = max(facts.turns, default=0)
    truncated, summarized = facts.total("truncated"), facts.total("summarized")
    if truncated == 0 and summarized == 0:
        if max_turn < truncate_at:
            return (f"Microcompact never ran: no run reached loop turn {truncate_at} (the "
                    f"longest reached {max_turn}), and ChatCLI skips the first {truncate_at} "
                    "calls of every run.")
        if facts.largest_result < min_size:
            return (f"Microcompact never fired: no result reached the {min_size}-byte minimum "
                    f"(largest: {facts.largest_result} bytes).")
        return "Microcompact never fired: no large result grew old enough."
    if summarized == 0:
        head = facts.env("mc_truncate_head_chars")
        tail = facts.env("mc_truncate_tail_chars")
        reason = (
            f"every result reaching age {summarize_at} had already been truncated below "
            f"the {min_size}-byte minimum (previews are about {head}+{tail} bytes)"
            if head + tail + 200 < min_size
            else f"no result reached age {summarize_at} while still {min_size} bytes or more"
        )
        return f"The summarize tier never fired: {reason}."
    return None
