"""Stages: one module each, one signature `run(history, ctx) -> StageResult`.

A stage never mutates its input (messages are immutable; histories are returned as new tuples)
and reports what it did in a plain dict. Side effects (spill files) go through `ctx.spills`, an
injected service owned by the replay. The order and phases of stages live in `registry.py`.

A stage module also says what its report means, so nothing outside it interprets one: next to
`run` it defines `activity(report) -> int` (how much it did at one call, 0 = did not fire),
`describe(report) -> str` (the report in one sentence) and `quiet_note(facts) -> str | None`
(why it never fired over a whole replay, given `ReplayFacts`), plus, when it has them, the
limit line the chart draws and instructions it adds to every prompt. `registry.py` wires them
into the stage's `StageDef`; see its docstring for the whole recipe.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import is_
from typing import Any

from ..history import History
from ..messages import Message
from ..params import PARAMS, env_default
from ..tokens import TokenCounter


@dataclass(frozen=True)
class StageResult:
    # A tuple, or the replay's `History` handed on (`frozen`, `with_changes`): a sequence.
    history: Sequence[Message]
    report: dict[str, Any]
    # When the stage knows them: the positions where `history` holds a message other than the
    # input's (same length). Lets the replay re-measure just those, not scan the history.
    changed: Sequence[int] | None = None
    # When the stage builds its output from the one it returned at the previous call: that
    # output and where `history` holds other messages than it (below its length). Lets the
    # replay measure what changed since, where `changed` (against the input) is most of a
    # long history for a gateway stage rewriting every older result.
    since: Since | None = None


@dataclass(frozen=True)
class Since:
    previous: Sequence[Message]
    positions: tuple[int, ...]  # each once, in any order


@dataclass(frozen=True)
class Delta:
    """A stage's input compared with what the stage saw (`input`) and made (`output`) at the
    previous call: outside `positions`, and below the shorter length, the messages are the
    same objects. The replay knows this from what each stage reported, so a stage memo can
    look at a handful of positions instead of scanning a history that only grew."""

    input: Sequence[Message]
    output: Sequence[Message]
    # The sets of positions whose union `positions` is, joined only when a stage asks: a
    # gateway stage rewriting every older result makes one a long history long at every call.
    parts: tuple[Collection[int], ...]

    @cached_property
    def positions(self) -> frozenset[int]:
        return frozenset().union(*self.parts)


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
    # A per-replay, per-stage cache a stage may use to skip work it did at the previous call.
    # It must never change a result: with `memo=None` a stage computes everything afresh.
    memo: dict[str, Any] | None = None
    # Set by the replay: where this input can differ from the stage's input or output at the
    # previous call. Read it through `changed_since`, never directly.
    delta: Delta | None = None
    # The session's `meta` (SPEC-agents §2.5.0.8): `model`, `cwd`, `session_id`,
    # `model_context_window`, `recorded_compactions`; empty for a scenario.
    session: Mapping[str, Any] = field(default_factory=dict)
    # The session's token model (SPEC §11, `token_model.py`), None without one: stages read it
    # through `token_model.compared`, never directly.
    token_model: Any = None

    @property
    def documented(self) -> bool:
        return self.params.get("semantics") == "documented"

    def env(self, key: str) -> int:
        """Effective ChatCLI knob (e.g. `turn_budget_chars`), parsed as ChatCLI parses it."""
        return self.params["_env_effective"][key]



def handed_on(history: Sequence[Message]) -> Sequence[Message]:
    """A stage's input as its unchanged output: the very object (the replay then measures
    nothing again), or a tuple of a plain list a caller handed in."""
    return tuple(history) if isinstance(history, list) else history


def view_result(history: Sequence[Message], out: Sequence[Message],
                report: dict[str, Any]) -> StageResult:
    """A stage's result when it builds a new view: `history` itself, with no changed
    positions, when the view holds the very same messages (so the replay re-measures
    nothing), else the view."""
    if len(out) == len(history) and all(a is b for a, b in zip(out, history, strict=True)):
        return StageResult(history, report, ())
    return StageResult(tuple(out), report)

# ChatCLI measures in bytes; its documentation speaks of characters (SPEC §2.2 row 12). Stages
# written once over `Units` (bytes or str) cover both: slicing, len and find mean the same. A
# function over units is generic (`def f[U: (bytes, str)](s: U) -> U`): it returns the type it
# was given.
Units = bytes | str


def to_units(content: bytes, documented: bool) -> Units:
    return content.decode("utf-8", "replace") if documented else content


def from_units(value: Units) -> bytes:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def lit[U: (bytes, str)](text: str, like: U) -> U:
    """A literal in the same unit type as `like`."""
    return text if isinstance(like, str) else text.encode("utf-8")


def changed_positions(before: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions (within the shorter length) where `after` holds a different object.

    Histories share unchanged message objects and usually differ in a handful of places, so
    blocks are compared as tuples first (identity is checked before equality, in C) and only
    differing blocks are scanned one by one. Equal but distinct messages may count as
    unchanged, which is what every caller needs.
    """
    n = min(len(before), len(after))
    out: list[int] = []
    for start in range(0, n, _BLOCK):
        end = min(start + _BLOCK, n)
        if tuple(before[start:end]) == tuple(after[start:end]):
            continue
        out.extend(i for i in range(start, end) if before[i] is not after[i])
    return out


_BLOCK = 64


def other_objects(before: Sequence[Any], after: Sequence[Any]) -> list[int]:
    """Positions (within the shorter length) where `after` holds another object than
    `before`, by identity only (equal messages can differ in `meta`, which equality skips),
    block by block in C like `changed_positions` (chunk by chunk between two `History`s)."""
    if isinstance(before, History) and isinstance(after, History):
        return before.other_objects(after)
    n = min(len(before), len(after))
    out: list[int] = []
    for start in range(0, n, _BLOCK):
        end = min(start + _BLOCK, n)
        if all(map(is_, before[start:end], after[start:end])):
            continue
        out.extend(i for i in range(start, end) if before[i] is not after[i])
    return out


def changed_since(before: Sequence[Any], after: Sequence[Any], ctx: StageContext,
                  below: int | None = None) -> list[int]:
    """`changed_positions(before[:below], after)`, in ascending order, answered from the
    replay's `Delta` when `before` is what this stage saw or made at the previous call."""
    n = min(len(before), len(after), len(before) if below is None else below)
    delta = ctx.delta
    if delta is not None and (before is delta.input or before is delta.output):
        return sorted(i for i in delta.positions if i < n and before[i] is not after[i])
    return changed_positions(before[:n], after)


@dataclass(frozen=True)
class ReplayFacts:
    """What a stage's `quiet_note` may read about a whole replay: its own report at every call
    (an empty mapping where it did not run), each call's loop turn, the replay's parameter
    values, and the size of the largest tool result of the transcript."""

    reports: tuple[Mapping[str, Any], ...]
    turns: tuple[int, ...]
    values: Mapping[str, Any]
    largest_result: int  # bytes

    def total(self, key: str) -> int:
        """The sum of an integer report field over every call (absent or null counts 0)."""
        return sum(r.get(key, 0) or 0 for r in self.reports)

    def value(self, name: str) -> Any:
        """A parameter's value in this replay, or its default from the parameter table."""
        return self.values.get(name, PARAMS[name].default)

    def env(self, key: str) -> int:
        """A ChatCLI knob's effective value (e.g. `mc_min_content_size`), or its default."""
        effective = self.values.get("_env_effective") or {}
        return effective[key] if key in effective else env_default(key)


__all__ = ["Delta", "Message", "ReplayFacts", "Since", "StageContext", "StageResult", "Units",
           "changed_positions", "changed_since", "from_units", "handed_on", "lit",
           "other_objects", "to_units"]
