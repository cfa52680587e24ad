"""What a web process's kept things cost in memory: estimates, cheap to compute, never below
what was measured (`tests/web/test_bounded_replays.py` checks them against tracemalloc).

`ctxsim.replays.cache` bounds everything it keeps by these: a loaded session by its contents,
a stored summary by its calls (`run_bytes`), a paused or kept replay by what it made and the
calls it holds (`replay_bytes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

# Python's cost of one message object beyond its content (the dataclass, its fields, the bytes
# header, its token-cost cache entry), and of one reference in a tuple or list.
MESSAGE_OVERHEAD = 500
REFERENCE = 8
# One entry of a replay's cost cache (the dict slot, the (message, tokens) pair, the int).
COST_ENTRY = 200
# A replay's fixed cost (its stages' memos, counters, generator frame) and one stored summary's
# cost per call in memory (the parsed JSON of `ReplayRun.calls`: about 4× its ~0.9 KB of text).
REPLAY_BASE = 128 * 1024
RUN_CALL_BYTES = 4 * 1024
# One kept call's own objects (its result, lists, spill records) and each stage's run of it
# (the object and its report).
CALL_BASE, STAGE_RUN = 1024, 512


def _message_bytes(message: Any) -> int:
    calls = sum(len(c.arguments) + len(c.name) + len(c.id) + 150 for c in message.tool_calls)
    return len(message.content) + calls + MESSAGE_OVERHEAD


MEMO_OBJECTS = 200_000  # a walk of the stages' memos stops past this many objects


def _memo_bytes(memos: Any, costs: Mapping[int, Any], canonical: Any) -> int:
    """What the stages' memos hold (strings, bytes, containers and the messages in them, each
    once), walked up to MEMO_OBJECTS objects; the session's own messages and contents, and the
    messages the cost cache holds (counted there), are not counted."""
    total = 0
    seen = {id(m) for m in canonical}
    seen.update(id(m.content) for m in canonical)
    stack = [memos]
    while stack and len(seen) < MEMO_OBJECTS:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (bytes, str, bytearray)):
            total += len(value) + 40
        elif isinstance(value, dict):
            total += 100 * len(value) + 64
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            total += REFERENCE * len(value) + 56
            stack.extend(value)
        elif hasattr(value, "content") and hasattr(value, "tool_calls"):
            hit = costs.get(id(value))
            if hit is None or hit[0] is not value:
                total += _message_bytes(value)
        elif hasattr(value, "__dict__"):
            total += 100
            stack.extend(vars(value).values())
        else:
            total += 32
    return total


@dataclass
class _Sized:
    """What `replay_bytes` counted of one replay so far: its cost cache and spill records only
    grow, so each step of a paused replay measures only what that step added."""

    entries: int = 0  # cost cache entries counted, and the bytes of the messages they hold
    made: int = 0
    records: int = 0  # spill records counted, and their bytes
    spilled: int = 0
    memo: int = 0  # the stages' memos, walked again once the cost cache grew by a tenth
    memo_entries: int = -1
    # The calls held (`_calls_bytes`): a paused replay's only grow, so the next measure
    # counts those added since, sharing what was seen.
    calls: int = 0
    last_call: Any = None
    calls_bytes: int = 0
    seen: set[int] = field(default_factory=set)


def replay_bytes(replay: Any, *calls: Any) -> int:
    """Estimated bytes a replay paused at (or kept for) `calls` holds beyond its session's
    messages: every message it made (previews, stubs, summaries: all stay in the replay's
    cost cache, which keeps each message it measured) with its content, the cache's entries,
    the references of the calls' histories, its spill records, what its stages' memos hold
    (walked again when the cache grew by a tenth since), what its call views remember, and a
    fixed part."""
    sized = replay.__dict__.get("_ctxsim_sized")
    if sized is None:
        sized = replay.__dict__["_ctxsim_sized"] = _Sized()
    canonical = replay.messages
    costs = replay.measured
    if len(costs) > sized.entries:
        for m, _ in islice(costs.values(), sized.entries, None):
            origin = m.origin
            if origin is None or origin >= len(canonical) or canonical[origin] is not m:
                sized.made += _message_bytes(m)
        sized.entries = len(costs)
    records = replay.spills.records
    if len(records) > sized.records:
        # Each spill's name and path, and its bytes unless dropped (`spills.drop_contents`).
        sized.spilled += sum(300 + len(r.content) for r in islice(records, sized.records, None))
        sized.records = len(records)
    if sized.memo_entries < 0 or len(costs) > sized.memo_entries * 1.1:
        sized.memo = _memo_bytes(getattr(replay, "memos", None) or {}, costs, canonical)
        sized.memo_entries = len(costs)
    views = replay.__dict__.get("_call_views")  # the call views' memo (`services._view_memo`)
    return (REPLAY_BASE + sized.made + COST_ENTRY * sized.entries + _calls_bytes(sized, calls)
            + sized.spilled + sized.memo + (views.size() if views is not None else 0))


def _calls_bytes(sized: _Sized, calls: tuple[Any, ...]) -> int:
    """The calls' own objects and the references their histories hold, each part shared
    between histories counted once: a `History`'s chunks are shared with the histories it was
    made from, so a replay keeping every call of a short session holds little more than its
    last call's histories (a `Prefix` is a window on the replay's raw list, counted per call).
    Calls that extend those counted last time are counted alone."""
    n = sized.calls
    if n > len(calls) or (n and calls[n - 1] is not sized.last_call):
        n, sized.calls_bytes, sized.seen = 0, 0, set()
    seen, refs = sized.seen, 0
    for call in calls[n:]:
        sized.calls_bytes += CALL_BASE + STAGE_RUN * len(call.stages)
        for history in (call.raw_history, call.input_history, call.sent, call.persistent,
                        *(r.history for r in call.stages)):
            storage = getattr(history, "storage", None)
            for part in storage() if storage is not None else (history,):
                if id(part) not in seen:
                    seen.add(id(part))
                    refs += len(part)
    sized.calls_bytes += REFERENCE * refs
    sized.calls, sized.last_call = len(calls), calls[-1] if calls else None
    return sized.calls_bytes


def run_bytes(run: Any) -> int:
    """Estimated bytes of a stored summary in memory."""
    return RUN_CALL_BYTES * max(len(run.calls), 1) + len(run.spill_files) * 8
