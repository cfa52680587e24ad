"""Every stage, declared once: its phases, its parameters, what it does (SPEC §3), and what
its report means to the people reading a replay.

Phases run in `PHASES` order: dispatch (once, as a result enters the history), persistent (on
the history the client keeps), outgoing (on the per-call copy; the anchor is appended as it
starts), gateway (stateless, on what the client sent).

Adding a stage:

1. Write `stages/<name>.py` with `run(history, ctx) -> StageResult` and, beside it, what its
   report means: `activity(report) -> int`, `describe(report) -> str`,
   `quiet_note(facts: ReplayFacts) -> str | None`, and when the stage has them
   `limit_line(values) -> (label, tokens | None)` and `instructions(values) -> str`.
2. Declare its parameters in `params.py` (`PARAMS`, in the order the form shows them; an agent
   stage's in `params_agents.py`, which adds them to the same table).
3. Add one `StageDef` below, in the order the stages table lists them. Its `family` names the
   tool it models (`FAMILIES`; a new tool also gets a `Family` here and an entry in
   `export.FORMATS`); `exported` lists the parameters that tool's own configuration carries.
4. Put it in a profile (`profiles.py`) if a built-in profile runs it.

Nothing outside `stages/` interprets a stage's report: the web pages, the notes and the
exports read these fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import registry_agents2
from .messages import Message
from .params import PARAMS
from .stages import (
    ReplayFacts,
    StageContext,
    StageResult,
    anthropic_compact,
    budget,
    claude_code_autocompact,
    claude_code_microcompact,
    claude_code_tool_output,
    clear_thinking,
    clear_tool_uses,
    codex_autocompact,
    codex_tool_output,
    context_limit,
    microcompact,
    openhands_condenser,
    pairing,
    tool_cap,
    tool_context,
)

PHASES = ("dispatch", "persistent", "outgoing", "gateway")
# Parameters every profile accepts: they shape the replay itself, not one stage.
ENGINE_PARAMS = ("counter", "image_rule", "loop_mode", "anchor_text")

Report = Mapping[str, Any]  # what a stage's run reported at one call
Values = Mapping[str, Any]  # a replay's parameter values (`RunConfig.values`)


def no_activity(report: Report) -> int:
    return 0


def describe_fields(report: Report) -> str:
    """The default one-line description: the report's plain fields."""
    return ", ".join(f"{k}: {v}" for k, v in report.items() if not isinstance(v, (list, dict)))


def no_note(facts: ReplayFacts) -> str | None:
    return None


@dataclass(frozen=True)
class StageDef:
    """A stage as the engine runs it and as the pages explain it.

    - `run(history, ctx) -> StageResult`: the stage itself.
    - `activity(report) -> int`: how many things it did at one call; 0 = it did not fire. The
      session totals add it up per stage and `quiet_note` uses it.
    - `describe(report) -> str`: the report at one call in one plain sentence.
    - `quiet_note(facts) -> str | None`: over a whole replay, the sentence for a tier or limit
      that never fired and why (None when it fired). `facts` is a `ReplayFacts`.
    - `limit_line(values) -> (label, tokens | None)`: the horizontal line the token chart draws
      for this stage (None: none). The first enabled stage, in registry order, that has one
      draws it.
    - `instructions(values) -> str`: text the stage's tool adds to every prompt (a gateway's
      own system instructions), counted in the raw and sent totals of every call.
    - `exported`: the parameters the export of its `family`'s tool carries; the family's other
      parameters are listed as left out.
    - `measures_billed(values) -> bool`: the stage's token counts (its reports' `tokens_before`)
      are the provider's recorded tokens, not ctxsim's estimate, so pages do not calibrate them.
    """

    name: str
    label: str
    phases: tuple[str, ...]
    params: tuple[str, ...]
    run: Callable[[Sequence[Message], StageContext], StageResult]
    help: str = ""
    family: str = ""  # which real tool it models: a key of FAMILIES
    activity: Callable[[Report], int] = no_activity
    describe: Callable[[Report], str] = describe_fields
    quiet_note: Callable[[ReplayFacts], str | None] = no_note
    limit_line: Callable[[Values], tuple[str, int | None]] | None = None
    instructions: Callable[[Values], str] | None = None
    exported: tuple[str, ...] = ()
    measures_billed: Callable[[Values], bool] | None = None


@dataclass(frozen=True)
class Family:
    """A real tool some stages model: its name on the pages, and the engine parameters that are
    its settings too (so its export lists them when they differ from the default)."""

    name: str
    label: str
    params: tuple[str, ...] = ()


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("chatcli", "ChatCLI", ("loop_mode", "anchor_text")),
        Family("aivax", "AIVAX gateway"),
        Family("anthropic", "Anthropic"),
        Family("claude-code", "Claude Code"),
        Family("codex", "Codex CLI"),
        Family("openhands", "OpenHands"),
        Family("gemini-cli", "Gemini CLI"),
        Family("openhands-v1", "OpenHands V1 (software-agent-sdk)"),
        Family("cline", "Cline"),
        Family("roo-code", "Roo Code"),
        Family("aider", "Aider"),
        Family("opencode", "OpenCode"),
        Family("mini-swe-agent", "mini-swe-agent"),
    )
}


# SPEC-agents-2's stages (Gemini CLI, OpenHands V1, Cline, Roo Code, Aider, OpenCode,
# mini-swe-agent), declared in their own module; they follow the part-1 agents' in STAGES.
AGENT_STAGES_2 = registry_agents2.stage_defs(StageDef)
ERA_TABLES = registry_agents2.ERA_TABLES

STAGES: dict[str, StageDef] = {
    s.name: s
    for s in (
        StageDef(
            "tool_cap", "Per-tool cap", ("dispatch",), ("tool_caps", "semantics"), tool_cap.run,
            "ChatCLI's per-tool cap when a result enters the history.", "chatcli",
        ),
        StageDef(
            "microcompact", "Microcompact", ("persistent", "outgoing"),
            ("env", "ccr", "semantics", "exempt_tools"), microcompact.run,
            "Old results become previews, then one-line summaries.", "chatcli",
            activity=microcompact.activity, describe=microcompact.describe,
            quiet_note=microcompact.quiet_note, exported=("env", "ccr"),
        ),
        StageDef(
            "pairing", "Pairing repair", ("persistent", "outgoing"), ("semantics",), pairing.run,
            "Every call gets exactly one result.", "chatcli",
            activity=pairing.activity, describe=pairing.describe, quiet_note=pairing.quiet_note,
        ),
        StageDef(
            "budget", "Budget + spill", ("persistent", "outgoing"),
            ("env", "spill_dir", "semantics"), budget.run,
            "Large results are spilled to files and replaced by previews.", "chatcli",
            activity=budget.activity, describe=budget.describe, quiet_note=budget.quiet_note,
            exported=("env",),
        ),
        StageDef(
            "tool_context", "Tool context", ("gateway",),
            ("toolContextCount", "toolContextPlaceholder"), tool_context.run,
            "Only the most recent tool results keep their content.", "aivax",
            activity=tool_context.activity, describe=tool_context.describe,
            quiet_note=tool_context.quiet_note, exported=("toolContextCount",),
        ),
        StageDef(
            "context_limit", "Context limit", ("gateway",),
            ("contextMaximumSize", "contextOverflowAction", "systemInstructions"),
            context_limit.run, "Throw or truncate when the prompt is over the limit.", "aivax",
            activity=context_limit.activity, describe=context_limit.describe,
            quiet_note=context_limit.quiet_note, limit_line=context_limit.limit_line,
            instructions=context_limit.instructions,
            exported=("contextMaximumSize", "contextOverflowAction"),
        ),
        StageDef(
            "clear_tool_uses", "Clear tool uses", ("gateway",),
            ("trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs",
             "placeholder"), clear_tool_uses.run,
            "Anthropic context editing: old tool results are cleared.", "anthropic",
            activity=clear_tool_uses.activity, describe=clear_tool_uses.describe,
            quiet_note=clear_tool_uses.quiet_note, limit_line=clear_tool_uses.limit_line,
            exported=("trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"),
        ),
        # SPEC-agents §2.5: Claude Code (proprietary: its documentation, issues and observed
        # transcripts, else ctxsim's parameterised defaults) and the Anthropic server edits.
        StageDef(
            "claude_code_tool_output", "Claude Code tool output", ("dispatch",),
            ("claude_env", "cc_bash_mode", "cc_bash_tools", "cc_bash_persist_trim",
             "cc_mcp_mode", "cc_mcp_truncation_notice", "cc_mcp_precheck_factor",
             "cc_persist_threshold_chars", "cc_persist_overrides", "cc_tool_results_dir",
             "cc_preview_cut", "cc_read_cap"), claude_code_tool_output.run,
            "Bash and MCP caps; large results saved to a file behind a 2 KB preview.",
            "claude-code", describe=claude_code_tool_output.describe, exported=("claude_env",),
        ),
        StageDef(
            "claude_code_microcompact", "Claude Code microcompact", ("persistent",),
            ("cc_microcompact_trigger", "cc_microcompact_gap_minutes",
             "cc_microcompact_keep_recent", "cc_microcompact_count_trigger",
             "cc_microcompact_tools", "cc_microcompact_placeholder"),
            claude_code_microcompact.run,
            "Old tool results become [Old tool result content cleared].", "claude-code",
            activity=claude_code_microcompact.activity,
            describe=claude_code_microcompact.describe,
            quiet_note=claude_code_microcompact.quiet_note,
        ),
        StageDef(
            "claude_code_autocompact", "Claude Code auto-compact", ("outgoing",),
            ("claude_env", "cc_model", "cc_context_window", "cc_max_output_tokens",
             "cc_autocompact_buffer_tokens", "cc_summary_reserve_tokens", "cc_autocompact_mode",
             "cc_token_source", "cc_summary_template", "summary_placeholder_tokens"),
            claude_code_autocompact.run,
            "At the threshold the conversation is replaced by one summary.", "claude-code",
            activity=claude_code_autocompact.activity,
            describe=claude_code_autocompact.describe,
            quiet_note=claude_code_autocompact.quiet_note,
            limit_line=claude_code_autocompact.limit_line, exported=("claude_env",),
            measures_billed=claude_code_autocompact.measures_billed,
        ),
        StageDef(
            "clear_thinking", "Clear thinking", ("gateway",), ("thinking_keep",),
            clear_thinking.run, "Anthropic context editing: thinking of older turns is removed.",
            "anthropic", activity=clear_thinking.activity, describe=clear_thinking.describe,
            quiet_note=clear_thinking.quiet_note, exported=("thinking_keep",),
        ),
        StageDef(
            "anthropic_compact", "Anthropic compaction", ("gateway",),
            ("compact_trigger", "compact_instructions", "compact_pause_after_compaction",
             "anthropic_compact_mode", "summary_placeholder_tokens"), anthropic_compact.run,
            "Server-side compaction: over the trigger the input becomes one compaction block.",
            "anthropic", activity=anthropic_compact.activity, describe=anthropic_compact.describe,
            quiet_note=anthropic_compact.quiet_note, limit_line=anthropic_compact.limit_line,
            exported=("compact_trigger", "compact_instructions",
                      "compact_pause_after_compaction"),
        ),
        # SPEC-agents §2.5.4–2.5.6: open-source agents, reproduced from their code.
        StageDef(
            "codex_tool_output", "Codex tool output", ("dispatch",),
            ("codex_config", "codex_output_truncation", "codex_truncation_policy",
             "codex_use_recorded_policy"),
            codex_tool_output.run, "Codex CLI keeps the head and tail of every tool output "
            "within its model's truncation policy × 1.2.", "codex",
            activity=codex_tool_output.activity, describe=codex_tool_output.describe,
            quiet_note=codex_tool_output.quiet_note, exported=("codex_config",),
        ),
        StageDef(
            "codex_autocompact", "Codex auto-compaction", ("outgoing",),
            ("codex_config", "codex_autocompact_mode", "codex_limit_semantics",
             "codex_token_source", "codex_user_message_budget", "codex_contextual_prefixes",
             "summary_placeholder_tokens"), codex_autocompact.run,
            "At 90 % of the window Codex replaces the history by the recent user messages and "
            "a summary.", "codex", activity=codex_autocompact.activity,
            describe=codex_autocompact.describe, quiet_note=codex_autocompact.quiet_note,
            limit_line=codex_autocompact.limit_line, exported=("codex_config",),
            measures_billed=codex_autocompact.measures_billed,
        ),
        StageDef(
            "openhands_condenser", "OpenHands condenser", ("outgoing",),
            ("openhands_condenser_config", "openhands_max_message_chars", "openhands_assembly",
             "openhands_request_over_tokens", "openhands_mode", "summary_placeholder_tokens"),
            openhands_condenser.run, "OpenHands' condenser reduces the event history, then "
            "OpenHands turns the kept events into messages.", "openhands",
            activity=openhands_condenser.activity, describe=openhands_condenser.describe,
            quiet_note=openhands_condenser.quiet_note,
            exported=("openhands_condenser_config", "openhands_max_message_chars"),
        ),
        *AGENT_STAGES_2,
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


def family_params(family: str) -> tuple[str, ...]:
    """Every parameter of a tool: its stages' and its own engine settings, in form order."""
    names = set(FAMILIES[family].params)
    for stage in STAGES.values():
        if stage.family == family:
            names.update(stage.params)
    return tuple(n for n in PARAMS if n in names)


def exported_params(family: str) -> tuple[str, ...]:
    """The parameters the tool's own configuration carries, in form order."""
    names = {n for s in STAGES.values() if s.family == family for n in s.exported}
    return tuple(n for n in PARAMS if n in names)


def instructions_of(entries: Sequence[tuple[str, str]], values: Values) -> str:
    """The instructions the stage list's tools add to every prompt: the first stage's that has
    some (`StageDef.instructions`), counted in every call's raw and sent totals."""
    for stage, _ in entries:
        instructions = STAGES[stage].instructions
        text = instructions(values) if instructions is not None else ""
        if text:
            return text
    return ""
