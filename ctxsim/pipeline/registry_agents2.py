"""The stages of SPEC-agents-2, declared as `StageDef`s in the order the stages table lists
them (registry.py puts them into `STAGES` after the part-1 agents'), and the version eras of
those that have them (SPEC-agents §2.5.0.11), for an era module to read.

`stage_defs(StageDef)` builds them with registry.py's class, so this module never imports
registry.py (which imports it).
"""

from __future__ import annotations

from typing import Any

from .stages import (
    aider_summarize,
    cline_truncation,
    gemini_compress,
    gemini_mask,
    gemini_tool_output,
    mini_swe_output,
    opencode_compact,
    opencode_prune,
    openhands_v1_condenser,
    openhands_v1_tool_output,
    roo_condense,
)

GEMINI_VERSIONED = ("gemini_version", "gemini_token_limit")


def stage_defs(StageDef: Any) -> tuple[Any, ...]:  # noqa: N803 (registry's class)
    return (
        StageDef(
            "gemini_tool_output", "Gemini CLI tool output", ("dispatch",),
            (*GEMINI_VERSIONED, "gemini_truncate_threshold", "gemini_truncate_mode",
             "gemini_truncate_lines"), gemini_tool_output.run,
            "Shell and MCP outputs keep 20 % head and 80 % tail of the threshold.", "gemini-cli",
            activity=gemini_tool_output.activity, describe=gemini_tool_output.describe,
            quiet_note=gemini_tool_output.quiet_note,
            exported=("gemini_truncate_threshold", "gemini_truncate_lines"),
        ),
        StageDef(
            "gemini_mask", "Gemini CLI output masking", ("persistent",),
            ("gemini_version", "gemini_mask_enabled", "gemini_mask_protect_tokens",
             "gemini_mask_min_prunable_tokens", "gemini_mask_protect_latest_turn"),
            gemini_mask.run, "Old tool outputs past the protected newest ones become masked "
            "previews.", "gemini-cli", activity=gemini_mask.activity,
            describe=gemini_mask.describe, quiet_note=gemini_mask.quiet_note,
            exported=("gemini_mask_protect_tokens", "gemini_mask_min_prunable_tokens",
                      "gemini_mask_protect_latest_turn"),
        ),
        StageDef(
            "gemini_compress", "Gemini CLI compression", ("outgoing",),
            (*GEMINI_VERSIONED, "gemini_compression_threshold", "gemini_function_response_budget",
             "gemini_truncate_threshold", "gemini_mode", "gemini_token_source",
             "summary_placeholder_tokens"), gemini_compress.run,
            "At the threshold the older 70 % of the history becomes a <state_snapshot> summary.",
            "gemini-cli", activity=gemini_compress.activity, describe=gemini_compress.describe,
            quiet_note=gemini_compress.quiet_note, limit_line=gemini_compress.limit_line,
            exported=("gemini_compression_threshold",),
            measures_billed=gemini_compress.measures_billed,
        ),
        StageDef(
            "openhands_v1_tool_output", "OpenHands V1 tool output", ("dispatch",),
            ("openhands_v1_terminal_limit", "openhands_v1_save_dir"), openhands_v1_tool_output.run,
            "Terminal outputs over 30,000 characters and tool texts over 50,000 are cut in the "
            "middle.", "openhands-v1", activity=openhands_v1_tool_output.activity,
            describe=openhands_v1_tool_output.describe,
            quiet_note=openhands_v1_tool_output.quiet_note,
        ),
        StageDef(
            "openhands_v1_condenser", "OpenHands V1 condenser", ("outgoing",),
            ("openhands_v1_max_size", "openhands_v1_keep_first", "openhands_v1_max_tokens",
             "openhands_v1_minimum_progress", "openhands_v1_mode", "openhands_v1_token_source",
             "summary_placeholder_tokens"), openhands_v1_condenser.run,
            "Past max_size events (or the token cap) the middle of the view becomes a summary.",
            "openhands-v1", activity=openhands_v1_condenser.activity,
            describe=openhands_v1_condenser.describe, quiet_note=openhands_v1_condenser.quiet_note,
            exported=("openhands_v1_max_size", "openhands_v1_keep_first", "openhands_v1_max_tokens",
                      "openhands_v1_minimum_progress"),
        ),
        StageDef(
            "cline_truncation", "Cline truncation", ("outgoing",),
            ("cline_context_window", "cline_mode", "cline_token_source"), cline_truncation.run,
            "Past maxAllowedSize half (or three quarters) of the conversation after the first "
            "pair is dropped.", "cline", activity=cline_truncation.activity,
            describe=cline_truncation.describe, quiet_note=cline_truncation.quiet_note,
            limit_line=cline_truncation.limit_line,
            measures_billed=cline_truncation.measures_billed,
        ),
        StageDef(
            "roo_condense", "Roo Code condense", ("outgoing",),
            ("roo_version", "roo_auto_condense", "roo_condense_percent", "roo_context_window",
             "roo_reserved_tokens", "roo_condense_style", "roo_mode", "roo_token_source",
             "summary_placeholder_tokens"), roo_condense.run,
            "At the threshold the conversation is condensed into a summary; else a sliding "
            "window.", "roo-code", activity=roo_condense.activity, describe=roo_condense.describe,
            quiet_note=roo_condense.quiet_note, limit_line=roo_condense.limit_line,
            exported=("roo_auto_condense", "roo_condense_percent"),
            measures_billed=roo_condense.measures_billed,
        ),
        StageDef(
            "aider_summarize", "Aider chat summary", ("outgoing",),
            ("aider_max_chat_history_tokens", "aider_max_input_tokens",
             "summary_placeholder_tokens"), aider_summarize.run,
            "Past max_chat_history_tokens the older done messages become one summary.", "aider",
            activity=aider_summarize.activity, describe=aider_summarize.describe,
            quiet_note=aider_summarize.quiet_note, exported=("aider_max_chat_history_tokens",),
        ),
        StageDef(
            "opencode_prune", "OpenCode prune", ("persistent",),
            ("opencode_prune", "opencode_prune_protect", "opencode_prune_minimum",
             "opencode_protected_tools"), opencode_prune.run,
            "Tool outputs older than the newest 40,000 tokens are cleared.", "opencode",
            activity=opencode_prune.activity, describe=opencode_prune.describe,
            quiet_note=opencode_prune.quiet_note, exported=("opencode_prune",),
        ),
        StageDef(
            "opencode_compact", "OpenCode compaction", ("outgoing",),
            ("opencode_auto", "opencode_context_limit", "opencode_input_limit",
             "opencode_max_output", "opencode_reserved", "opencode_keep_tokens", "opencode_mode",
             "opencode_token_source", "summary_placeholder_tokens"), opencode_compact.run,
            "At the usable size the conversation is replaced by a summary and a recent tail.",
            "opencode", activity=opencode_compact.activity, describe=opencode_compact.describe,
            quiet_note=opencode_compact.quiet_note, limit_line=opencode_compact.limit_line,
            exported=("opencode_auto", "opencode_reserved", "opencode_keep_tokens",
                      "opencode_context_limit", "opencode_input_limit", "opencode_max_output"),
            measures_billed=opencode_compact.measures_billed,
        ),
        StageDef(
            "mini_swe_output", "mini-swe-agent output", ("dispatch",),
            ("mini_swe_output_limit", "mini_swe_head_chars", "mini_swe_tail_chars"),
            mini_swe_output.run, "Outputs of 10,000 characters or more keep 5,000 at each end.",
            "mini-swe-agent", activity=mini_swe_output.activity,
            describe=mini_swe_output.describe, quiet_note=mini_swe_output.quiet_note,
        ),
    )


# The version eras of these stages (SPEC-agents §2.5.0.11), for an era module to read.
ERA_TABLES = {"gemini-cli": gemini_compress.ERAS, "roo-code": roo_condense.ERAS}
