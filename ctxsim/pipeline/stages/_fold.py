"""The call-schedule fold (SPEC-agents §2.5.0.4) for stages that emulate a stateful agent.

The agent decided at every earlier call on what it held then; a pure stage recomputes those
decisions from the prefixes of its input: `P_j = H[:a_j]` (a_j = position of the j-th assistant
message) for the earlier calls, `P_m = H` for the current one. The states after each earlier
step are kept in the stage memo while the input below `a_j` is unchanged, so a replay computes
each step once; with `memo=None` everything is recomputed (same result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..messages import Message
from . import StageContext, changed_since

# step(state, prefix_length, j, current) -> (state after the step, result of the step)
Step = Callable[[Any, int, int, bool], tuple[Any, Any]]


def assistant_positions(history: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(history) if m.role == "assistant"]


def call_of(index: int, positions: Sequence[int]) -> int:
    """r(i): the number of assistant messages before index `i`."""
    lo, hi = 0, len(positions)
    while lo < hi:
        mid = (lo + hi) // 2
        if positions[mid] < index:
            lo = mid + 1
        else:
            hi = mid
    return lo


def fold(history: tuple[Message, ...], ctx: StageContext, initial: Any, step: Step,
         key: str = "fold") -> Any:
    """Run `step` for every call 0 … m and return the result of step m (the current call).

    Invariant: the result equals a fold from `initial` over every prefix; a memo entry is
    reused only while the messages below its prefix length are the same objects.
    """
    positions = assistant_positions(history)
    memo = ctx.memo
    saved: list[tuple[int, Any]] = []
    if memo is not None and key in memo:
        before, saved = memo[key]
        changed = changed_since(before, history, ctx, len(before))
        first = changed[0] if changed else min(len(before), len(history))
        keep = 0
        while (keep < len(saved) and keep < len(positions)
               and saved[keep][0] == positions[keep] and positions[keep] <= first):
            keep += 1
        saved = saved[:keep]
    state = saved[-1][1] if saved else initial
    done = list(saved)
    for j in range(len(saved), len(positions)):
        state, _ = step(state, positions[j], j, False)
        done.append((positions[j], state))
    if memo is not None:
        memo[key] = (history, done)
    _, result = step(state, len(history), len(positions), True)
    return result
