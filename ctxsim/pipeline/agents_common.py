"""Conventions shared by the agent-native stages (SPEC-agents §2.5.0).

Pure helpers, no state. Public names, by section of the spec:

- §2.5.0.2 text units and exact helpers: `u16len`, `u16slice`, `cc_rough`, `approx_tokens`,
  `codex_bytes`, `js_parse_int`, `js_parse_float`, `is_env_truthy`, `fmt_size`,
  `full_prompt(history, ctx)`.
- §2.5.0.3 `leading_system_len(h)` (the length of `L(h)`), `is_recorded_summary(m)`,
  `is_real_user(m)`.
- §2.5.0.4 the call-schedule fold: `assistant_positions(h)`, `call_of_index(h, i)` (`r(i)`),
  `fold(history, ctx, initial, step)` → `FoldResult`.
- §2.5.0.5 recorded-compaction readers: `compaction_marker(m)`, `recorded_markers(h, source)`,
  `recorded_compactions(messages)` (the session-level list, with `call_index`).
- §2.5.0.6 placeholder summaries: `placeholder_text(...)`, `placeholder_message(...)`,
  `PLACEHOLDER_KIND`.
- §2.5.0.7 trace additions: `compaction_event(...)` builds the entry a stage puts in its
  report under `COMPACTION_EVENTS`; `trace.build_trace` gathers them into `compactions`.
- §2.5.0.8 engine additions: `StageContext.session`, `thinking_counted` in the token formula
  (both live where they belong: `stages/__init__.py`, `tokens.py`).
- §2.5.0.9 tool-shaped maps (`claude_env`, `codex_config`) are in `agent_settings.py`.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from .history import frozen
from .messages import Message, decode_for_display, is_valid_utf8
from .tokens import TokenCounter, full_prompt_tokens

# --- §2.5.0.2 text units ------------------------------------------------------------------


def u16len(s: str) -> int:
    """JavaScript `.length`: code points, plus one for each above U+FFFF."""
    if s.isascii():
        return len(s)
    # UTF-32 has 4 bytes per code point, UTF-16 2 or 4: the difference counts the astral ones.
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _u16_to_index(s: str, units: int) -> int:
    """The code-point index at UTF-16 offset `units`, moved down when it would split a pair."""
    if units <= 0:
        return 0
    pos = 0
    for i, c in enumerate(s):
        width = 2 if ord(c) > 0xFFFF else 1
        if pos + width > units:
            return i
        pos += width
    return len(s)


def u16slice(s: str, a: int, b: int) -> str:
    """UTF-16 units `a` (inclusive) to `b` (exclusive); an offset inside a surrogate pair moves
    down by one unit, so a pair is never split."""
    if s.isascii():
        return s[max(a, 0):max(b, 0)]
    return s[_u16_to_index(s, a):_u16_to_index(s, b)]


def cc_rough(n: int) -> int:
    """ctxsim's rough Claude Code token estimate: n / 4 with halves rounded up."""
    return (n + 2) // 4


def approx_tokens(b: int) -> int:
    """Codex `approx_token_count` on a UTF-8 byte length."""
    return (b + 3) // 4


def codex_bytes(content: bytes) -> bytes:
    """The bytes Codex sees: valid UTF-8 as is, else the display decoding re-encoded."""
    return content if is_valid_utf8(content) else decode_for_display(content).encode("utf-8")


JS_SPACE = ("\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004"
             "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(Infinity|[0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?)")


def js_parse_int(v: str) -> float | int:
    """JavaScript `parseInt(v, 10)`; `math.nan` where JavaScript gives NaN."""
    m = _INT.match(v.lstrip(JS_SPACE))
    return int(m.group(0)) if m else math.nan


def js_parse_float(v: str) -> float:
    """JavaScript `parseFloat(v)`; `math.nan` where JavaScript gives NaN."""
    m = _FLOAT.match(v.lstrip(JS_SPACE))
    if not m:
        return math.nan
    text = m.group(0)
    if text.lstrip("+-") == "Infinity":
        return -math.inf if text.startswith("-") else math.inf
    return float(text)


def is_env_truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() in {"1", "true", "yes", "on"}


def _one_decimal(x: Decimal) -> str:
    text = str(x.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    return text[:-2] if text.endswith(".0") else text


def fmt_size(n: int) -> str:
    """Size text of a `<persisted-output>` notice: `60 bytes`, `2KB`, `48.8KB`, `4.8MB`."""
    kb = Decimal(n) / 1024
    if kb < 1:
        return f"{n} bytes"
    if kb < 1024:
        return f"{_one_decimal(kb)}KB"
    mb = kb / 1024
    if mb < 1024:
        return f"{_one_decimal(mb)}MB"
    return f"{_one_decimal(mb / 1024)}GB"


def full_prompt(history: Sequence[Message], ctx: Any) -> int:
    """SPEC §5 full prompt of `history` with the session's tools and response schema."""
    return full_prompt_tokens(history, ctx.counter, "", ctx.tools, ctx.response_schema)


def text_of(m: Message) -> str:
    """A message's content in the unit of the TypeScript and Python tools (decoded text)."""
    return decode_for_display(m.content)


# --- §2.5.0.3 leading system block, recorded summaries ------------------------------------


def leading_system_len(h: Sequence[Message]) -> int:
    """len(L(h)): the longest prefix made only of system-role messages."""
    n = 0
    while n < len(h) and h[n].role == "system":
        n += 1
    return n


def compaction_marker(m: Message) -> Mapping[str, Any] | None:
    marker = m.meta.get("compaction")
    return marker if isinstance(marker, Mapping) else None


def is_recorded_summary(m: Message) -> bool:
    """A message whose `meta.compaction` marker says it is the recorded summary itself."""
    marker = compaction_marker(m)
    return marker is not None and marker.get("kind") == "summary"


def is_real_user(m: Message) -> bool:
    """A user message that is conversation: not a recorded summary, not a stage's injection."""
    return m.role == "user" and not is_recorded_summary(m) and m.meta.get("kind") not in (
        PLACEHOLDER_KIND, "compaction_block")


# --- §2.5.0.4 the call-schedule fold ------------------------------------------------------


def assistant_positions(h: Sequence[Message], ctx: Any = None) -> list[int]:
    """Indices of the assistant messages of `h`, in order.

    With a stage memo (`ctx.memo`; `h` a tuple) the previous call's list is updated from the
    positions that changed and the appended tail instead of scanning the whole history at
    every call: the list returned is then the memo's own, valid until the stage's next call
    (callers only read it)."""
    memo = ctx.memo if ctx is not None else None
    previous = memo.get("assistants") if memo is not None else None
    if previous is None:
        found = [i for i, m in enumerate(h) if m.role == "assistant"]
    else:
        before, found = previous
        if before is h:
            return found
        from .stages import changed_since  # here: the stages package imports this module

        n = min(len(before), len(h))
        if any((before[i].role == "assistant") != (h[i].role == "assistant")
               for i in changed_since(before, h, ctx)):
            found = [i for i, m in enumerate(h) if m.role == "assistant"]
        else:
            del found[bisect_left(found, n):]
            found.extend(i for i in range(n, len(h)) if h[i].role == "assistant")
    if memo is not None:
        memo["assistants"] = (h, found)
    return found


def call_of_index(h: Sequence[Message], i: int) -> int:
    """r(i): the number of assistant messages before index i."""
    return sum(1 for m in h[:i] if m.role == "assistant")


@dataclass(frozen=True)
class FoldResult:
    """The fold's outcome: the view of the current call (step m), the state after it and what
    the step function reported about step m."""

    view: tuple[Message, ...]
    state: Any
    info: Any
    call: int
    # What step m − 1 reported, when this fold ran it (None when the memo skipped it).
    previous_info: Any = None

    def report(self) -> dict[str, Any]:
        """The step's report, with the previous call's compaction first when it was learnt
        only now (from a marker on that call's response)."""
        report = self.info
        if self.previous_info is not None:
            report[COMPACTION_EVENTS] = [self.previous_info, *report.get(COMPACTION_EVENTS, ())]
        return report


# step(state, history, end, j) -> (new_state, view, info): step j sees the prefix
# history[:end]; for j < m, history[end] is the assistant message call j answered with.
Step = Callable[[Any, Sequence[Message], int, int], tuple[Any, Sequence[Message], Any]]


def fold(history: Sequence[Message], ctx: Any, initial: Any, step: Step,
         reuse_current: bool = True) -> FoldResult:
    """Recompute a stateful agent's decisions from the prefixes of `history` (§2.5.0.4).

    Invariant: the result equals folding `step` over P_0 … P_m from `initial`; the memo only
    skips steps whose prefix is unchanged since the previous call (same objects below a_j),
    so `memo=None` gives the same result. States must be immutable values. With
    `reuse_current`, the state after the current step is kept for the next call, where that
    step becomes a past one (a stage whose past steps read the response passes False).
    """
    h = frozen(history)
    starts = assistant_positions(h, ctx)
    memo = ctx.memo
    reuse = 0
    state = initial
    saved: list[tuple[int, Any]] = []  # (a_j, state after step j) for the steps done
    if memo is not None and memo.get("fold_input") is not None:
        from .stages import changed_since  # here: the stages package imports this module

        before = memo["fold_input"]
        old: list[tuple[int, Any]] = memo["fold_steps"]
        changed = changed_since(before, h, ctx)
        first = changed[0] if changed else min(len(before), len(h))
        # Below `first` the input holds the same messages, so the steps whose prefix ends
        # there are the old ones; a step that reads the response (not `reuse_current`) also
        # needs history[a_j] kept. Found by bisection: a scan made each call O(m).
        find = bisect_right if reuse_current else bisect_left
        reuse = min(find(old, first, key=lambda e: e[0]), len(starts))
        while reuse and starts[reuse - 1] != old[reuse - 1][0]:
            reuse -= 1
        if reuse:
            state = old[reuse - 1][1]
        del old[reuse:]  # the memo's own list, cut in place: a copy would be O(m) per call
        saved = old
    previous_info = None
    for j in range(reuse, len(starts)):
        state, _view, previous_info = step(state, h, starts[j], j)
        saved.append((starts[j], state))
    if reuse == len(starts):
        previous_info = None
    m = len(starts)
    final_state, view, info = step(state, h, len(h), m)
    if memo is not None:
        if reuse_current:
            saved.append((len(h), final_state))
        memo["fold_input"] = h
        memo["fold_steps"] = saved
    return FoldResult(tuple(view), final_state, info, m, previous_info)


def marker_positions(h: Sequence[Message], ctx: Any, key: str) -> list[int]:
    """Indices of the messages of `h` whose `meta` has `key`, in order.

    With a memo only the positions that changed since the previous call (and the appended
    tail) are looked at again: a long session has a handful of markers among thousands of
    messages, and this runs at every call."""
    memo = ctx.memo
    slot = "markers:" + key
    previous = memo.get(slot) if memo is not None else None
    if previous is None:
        found = [i for i, m in enumerate(h) if key in m.meta]
    else:
        from .stages import changed_since  # here: the stages package imports this module

        before, old = previous
        n = min(len(before), len(h))
        changed = set(changed_since(before, h, ctx))
        found = [i for i in old if i < n and i not in changed]
        found += [i for i in changed if key in h[i].meta]
        found += [i for i in range(n, len(h)) if key in h[i].meta]
        found.sort()
    if memo is not None:
        memo[slot] = (frozen(h), found)
    return found


def recorded_markers(h: Sequence[Message], key: str = "compaction",
                     source: str | None = None) -> list[tuple[int, int, Mapping[str, Any]]]:
    """(index, r(index), marker) of every message of `h` carrying `meta[key]` (and, when
    given, whose marker's `source` matches), in index order."""
    out: list[tuple[int, int, Mapping[str, Any]]] = []
    calls = 0
    for i, m in enumerate(h):
        marker = m.meta.get(key)
        if isinstance(marker, Mapping) and (source is None or marker.get("source") == source):
            out.append((i, calls, marker))
        if m.role == "assistant":
            calls += 1
    return out


# --- §2.5.0.5 the session-level list of recorded compactions ------------------------------


def recorded_compactions(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Every recorded marker of a history, in file order, with the call it belongs to.

    Entries are `{"source", "message_index", "trigger", "pre_tokens", "summary_present",
    "kind", "call_index"}`; importers store the same list (without `call_index`) as session
    `meta.recorded_compactions`.
    """
    out: list[dict[str, Any]] = []
    calls = 0
    for i, m in enumerate(messages):
        meta = m.meta
        entries: list[dict[str, Any]] = []
        c = meta.get("compaction")
        if isinstance(c, Mapping):
            kind = c.get("kind")
            present = kind == "summary" and (c.get("message_present", True) is not False)
            entries.append(_entry(c.get("source", ""), i, c.get("trigger"), c.get("pre_tokens"),
                                  present, kind))
        mc = meta.get("microcompaction")
        if isinstance(mc, Mapping):
            entries.append(_entry("claude-code", i, mc.get("trigger"), mc.get("pre_tokens"),
                                  False, "microcompact"))
        ac = meta.get("anthropic_compaction")
        if isinstance(ac, Mapping):
            entries.append(_entry("anthropic", i, None, None, ac.get("content") is not None,
                                  "compaction_block"))
        oc = meta.get("openhands_condensation")
        if isinstance(oc, Mapping):
            entries.append(_entry("openhands", i, None, None, oc.get("summary") is not None,
                                  "condensation"))
        for e in entries:
            e["call_index"] = calls
        out.extend(entries)
        if m.role == "assistant":
            calls += 1
    return out


def _entry(source: Any, index: int, trigger: Any, pre_tokens: Any, present: bool,
           kind: Any) -> dict[str, Any]:
    return {"source": source, "message_index": index, "trigger": trigger,
            "pre_tokens": pre_tokens, "summary_present": present, "kind": kind}


# --- §2.5.0.6 placeholder summaries --------------------------------------------------------

PLACEHOLDER_KIND = "placeholder_summary"


def placeholder_text(stage: str, items: int, tokens: int, call: int, target: int,
                     counter: TokenCounter) -> str:
    """The placeholder summary: the header, then " x" repeated until the counter reaches
    `target` tokens (the smallest such count, found by binary search on [0, 4·target + 4])."""
    head = (f"[ctxsim placeholder summary: {stage} summarized {items} items ({tokens} tokens) "
            f"at call {call}; the transcript has no summary for this point]")
    if counter.count(head.encode("utf-8")) >= target:
        return head
    lo, hi = 0, 4 * target + 4
    while lo < hi:
        mid = (lo + hi) // 2
        if counter.count((head + " x" * mid).encode("utf-8")) >= target:
            hi = mid
        else:
            lo = mid + 1
    return head + " x" * lo


def placeholder_message(role: str, text: str, kind: str = PLACEHOLDER_KIND) -> Message:
    """An injected summary message (origin None, `meta.kind` saying what it is)."""
    return Message.of(role, text, meta={"kind": kind})


# --- §2.5.0.7 trace additions --------------------------------------------------------------

# Report key under which a compaction stage lists what it applied or predicted at this call;
# the trace gathers these (with the call index) into its top-level `compactions`.
COMPACTION_EVENTS = "compaction_events"
EVENT_KINDS = ("predicted", "recorded", "predicted_and_recorded", "recorded_not_predicted")


def compaction_event(stage: str, kind: str, trigger: Any, summary_source: str | None,
                     tokens_before: int | None, tokens_after: int | None,
                     call_index: int | None = None) -> dict[str, Any]:
    """One entry of a report's `COMPACTION_EVENTS`. `call_index` is given only when the event
    belongs to an earlier call (a response's recorded block is seen one call later)."""
    assert kind in EVENT_KINDS, kind
    out = {"stage": stage, "kind": kind, "trigger": trigger, "summary_source": summary_source,
           "tokens_before": tokens_before, "tokens_after": tokens_after}
    if call_index is not None:
        out["call_index"] = call_index
    return out


def merge_compactions(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries in call order; a `predicted` and a later-learnt `recorded` entry of the same
    stage and call become one `predicted_and_recorded` entry."""
    out: list[dict[str, Any]] = []
    for e in sorted(entries, key=lambda e: e["call_index"]):
        twin = next((o for o in out if o["stage"] == e["stage"]
                     and o["call_index"] == e["call_index"]
                     and {o["kind"], e["kind"]} == {"predicted", "recorded"}), None)
        if twin is None:
            out.append(dict(e))
        else:
            twin["kind"] = "predicted_and_recorded"
            if e["kind"] == "recorded":
                twin["summary_source"] = e["summary_source"]
    return out
