"""Every stage, declared once: its phases, its parameters, what it does (SPEC §3).

Phases run in `PHASES` order: dispatch (once, as a result enters the history), persistent (on
the history the client keeps), outgoing (on the per-call copy; the anchor is appended as it
starts), gateway (stateless, on what the client sent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .messages import Message
from .stages import (
    StageContext,
    StageResult,
    budget,
    clear_tool_uses,
    context_limit,
    microcompact,
    pairing,
    tool_cap,
    tool_context,
)

PHASES = ("dispatch", "persistent", "outgoing", "gateway")
# Parameters every profile accepts: they shape the replay itself, not one stage.
ENGINE_PARAMS = ("counter", "image_rule", "loop_mode", "anchor_text")


@dataclass(frozen=True)
class StageDef:
    name: str
    label: str
    phases: tuple[str, ...]
    params: tuple[str, ...]
    run: Callable[[Sequence[Message], StageContext], StageResult]
    help: str = ""
    family: str = ""  # which real tool it models: chatcli | aivax | anthropic


STAGES: dict[str, StageDef] = {
    s.name: s
    for s in (
        StageDef("tool_cap", "Per-tool cap", ("dispatch",), ("tool_caps", "semantics"),
                 tool_cap.run, "ChatCLI's per-tool cap when a result enters the history.",
                 "chatcli"),
        StageDef("microcompact", "Microcompact", ("persistent", "outgoing"),
                 ("env", "ccr", "semantics", "exempt_tools"), microcompact.run,
                 "Old results become previews, then one-line summaries.", "chatcli"),
        StageDef("pairing", "Pairing repair", ("persistent", "outgoing"), ("semantics",),
                 pairing.run, "Every call gets exactly one result.", "chatcli"),
        StageDef("budget", "Budget + spill", ("persistent", "outgoing"),
                 ("env", "spill_dir", "semantics"), budget.run,
                 "Large results are spilled to files and replaced by previews.", "chatcli"),
        StageDef("tool_context", "Tool context", ("gateway",),
                 ("toolContextCount", "toolContextPlaceholder"), tool_context.run,
                 "Only the most recent tool results keep their content.", "aivax"),
        StageDef("context_limit", "Context limit", ("gateway",),
                 ("contextMaximumSize", "contextOverflowAction", "systemInstructions"),
                 context_limit.run, "Throw or truncate when the prompt is over the limit.",
                 "aivax"),
        StageDef("clear_tool_uses", "Clear tool uses", ("gateway",),
                 ("trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs",
                  "placeholder"), clear_tool_uses.run,
                 "Anthropic context editing: old tool results are cleared.", "anthropic"),
    )
}


class StageOrderError(ValueError):
    pass


def check_stage_list(entries: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Validate a (stage, phase) list: known stages, allowed phases, phase order respected.

    Invariant: the returned list runs its phases in `PHASES` order.
    """
    out: list[tuple[str, str]] = []
    last = 0
    for n, entry in enumerate(entries):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 or not all(
            isinstance(x, str) for x in entry
        ):
            raise StageOrderError(f"stages[{n}]: expected a [stage, phase] pair of strings")
        stage, phase = entry
        if stage not in STAGES:
            raise StageOrderError(
                f"stages[{n}]: unknown stage {stage!r} (known: {', '.join(STAGES)})"
            )
        if phase not in STAGES[stage].phases:
            raise StageOrderError(
                f"stages[{n}]: {stage} cannot run in phase {phase!r} "
                f"(allowed: {', '.join(STAGES[stage].phases)})"
            )
        rank = PHASES.index(phase)
        if rank < last:
            raise StageOrderError(
                f"stages[{n}]: phase {phase!r} of {stage} comes after phase {PHASES[last]!r}; "
                f"phases run in the order {' → '.join(PHASES)}"
            )
        if (stage, phase) in out or any(s == stage for s, _ in out):
            raise StageOrderError(f"stages[{n}]: {stage} is listed twice")
        last = rank
        out.append((stage, phase))
    return tuple(out)


def params_of(entries: Sequence[tuple[str, str]]) -> set[str]:
    """The config keys a stage list accepts (its stages' parameters + the engine's)."""
    names = set(ENGINE_PARAMS)
    for stage, _ in entries:
        names.update(STAGES[stage].params)
    return names
