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
ENGINE_PARAMS = ("counter", "loop_mode", "anchor_text")


@dataclass(frozen=True)
class StageDef:
    name: str
    label: str
    phases: tuple[str, ...]
    params: tuple[str, ...]
    run: Callable[[Sequence[Message], StageContext], StageResult]
    help: str = ""
    # which real tool it models: chatcli | aivax | anthropic | claude-code | codex | openhands
    family: str = ""


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
        # SPEC-agents §2.5: Claude Code (proprietary: documented, observed, else ctxsim's
        # parameterised defaults) and the Anthropic server edits.
        StageDef("claude_code_tool_output", "Claude Code tool output", ("dispatch",),
                 ("claude_env", "cc_bash_mode", "cc_bash_tools", "cc_bash_persist_trim",
                  "cc_mcp_mode", "cc_mcp_truncation_notice", "cc_mcp_precheck_factor",
                  "cc_persist_threshold_chars", "cc_persist_overrides", "cc_tool_results_dir",
                  "cc_preview_cut", "cc_read_cap"), claude_code_tool_output.run,
                 "Bash and MCP caps; large results saved to a file behind a 2 KB preview.",
                 "claude-code"),
        StageDef("claude_code_microcompact", "Claude Code microcompact", ("persistent",),
                 ("cc_microcompact_trigger", "cc_microcompact_gap_minutes",
                  "cc_microcompact_keep_recent", "cc_microcompact_count_trigger",
                  "cc_microcompact_tools", "cc_microcompact_placeholder"),
                 claude_code_microcompact.run,
                 "Old tool results become [Old tool result content cleared].", "claude-code"),
        StageDef("claude_code_autocompact", "Claude Code auto-compact", ("outgoing",),
                 ("claude_env", "cc_model", "cc_context_window", "cc_max_output_tokens",
                  "cc_autocompact_buffer_tokens", "cc_summary_reserve_tokens",
                  "cc_autocompact_mode", "cc_token_source", "cc_summary_template",
                  "summary_placeholder_tokens"), claude_code_autocompact.run,
                 "At the threshold the conversation is replaced by one summary.", "claude-code"),
        StageDef("clear_thinking", "Clear thinking", ("gateway",), ("thinking_keep",),
                 clear_thinking.run, "Anthropic context editing: thinking of older turns is "
                 "removed.", "anthropic"),
        StageDef("anthropic_compact", "Anthropic compaction", ("gateway",),
                 ("compact_trigger", "compact_instructions", "compact_pause_after_compaction",
                  "anthropic_compact_mode", "summary_placeholder_tokens"),
                 anthropic_compact.run, "Server-side compaction: over the trigger the input "
                 "becomes one compaction block.", "anthropic"),
        StageDef("codex_tool_output", "Codex tool output", ("dispatch",),
                 ("codex_config", "codex_truncation_policy", "codex_use_recorded_policy"),
                 codex_tool_output.run, "Codex CLI keeps the head and tail of every tool "
                 "output within its model's truncation policy × 1.2.", "codex"),
        StageDef("codex_autocompact", "Codex auto-compaction", ("outgoing",),
                 ("codex_config", "codex_autocompact_mode", "codex_limit_semantics",
                  "codex_token_source", "codex_user_message_budget",
                  "codex_contextual_prefixes", "summary_placeholder_tokens"),
                 codex_autocompact.run, "At 90 % of the window Codex replaces the history by "
                 "the recent user messages and a summary.", "codex"),
        StageDef("openhands_condenser", "OpenHands condenser", ("outgoing",),
                 ("openhands_condenser_config", "openhands_max_message_chars",
                  "openhands_assembly", "openhands_request_over_tokens", "openhands_mode",
                  "summary_placeholder_tokens"),
                 openhands_condenser.run, "OpenHands' condenser reduces the event history, "
                 "then OpenHands turns the kept events into messages.", "openhands"),
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
