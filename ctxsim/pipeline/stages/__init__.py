"""Stages: one module each, one signature `run(history, ctx) -> StageResult`.

A stage never mutates its input (messages are immutable; histories are returned as new tuples)
and reports what it did in a plain dict. Side effects (spill files) go through `ctx.spills`, an
injected service owned by the replay. The order and phases of stages live in `registry.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any

from ..messages import Message
from ..tokens import TokenCounter


@dataclass(frozen=True)
class StageResult:
    history: tuple[Message, ...]
    report: dict[str, Any]


@dataclass
class StageContext:
    """What a stage may read besides the history: its parameters and the call's position."""

    params: Mapping[str, Any]
    counter: TokenCounter
    loop_turn: int = 0
    call_index: int = 0
    spills: Any = None  # SpillService; only the budget stage writes
    tools: Any = None
    response_schema: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    # A per-replay, per-stage cache a stage may use to skip work it did at the previous call.
    # It must never change a result: with `memo=None` a stage computes everything afresh.
    memo: dict[str, Any] | None = None

    @property
    def documented(self) -> bool:
        return self.params.get("semantics") == "documented"

    def env(self, key: str) -> int:
        """Effective ChatCLI knob (e.g. `turn_budget_chars`), parsed as ChatCLI parses it."""
        return self.params["_env_effective"][key]


# ChatCLI measures in bytes; its documentation speaks of characters (SPEC §2.2 row 12). Stages
# written once over `Units` (bytes or str) cover both: slicing, len and find mean the same.
Units = bytes | str


def to_units(content: bytes, documented: bool) -> Units:
    return content.decode("utf-8", "replace") if documented else content


def from_units(value: Units) -> bytes:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def lit(text: str, like: Units) -> Units:
    """A literal in the same unit type as `like`."""
    return text if isinstance(like, str) else text.encode("utf-8")


def changed_positions(before: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions (within the shorter length) where `after` holds a different object.

    Runs in C (map + list.index), since histories share unchanged message objects and usually
    differ in a handful of places.
    """
    n = min(len(before), len(after))
    # Tuple equality checks identity first, in C: the common "nothing changed" case is cheap.
    # (Equal but distinct messages count as unchanged, which is what every caller needs.)
    if tuple(before[:n]) == tuple(after[:n]):
        return []
    same = list(map(is_, before, after))
    out: list[int] = []
    i = 0
    try:
        while True:
            i = same.index(False, i)
            out.append(i)
            i += 1
    except ValueError:
        return out


Stage = Any  # callable(history: Sequence[Message], ctx: StageContext) -> StageResult

__all__ = ["Message", "StageContext", "StageResult", "changed_positions", "from_units", "lit",
           "to_units"]
