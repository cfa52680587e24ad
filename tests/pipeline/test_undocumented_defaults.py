"""Claude Code is proprietary: the defaults ctxsim chose where its documentation, issues and
transcripts are silent ([X], SPEC-agents §2.5.0.1, §2.5.10) are flagged in the parameter table
and in the profiles, so the UI can say "ctxsim's default; not documented by Anthropic"."""

from __future__ import annotations

from ctxsim.pipeline.params import PARAMS
from ctxsim.pipeline.profiles import PROFILES
from ctxsim.pipeline.registry import params_of

NOTE = "ctxsim's default; not documented by Anthropic"

# The [X] defaults of the parameter tables of SPEC-agents §2.5.1–2.5.3 (read from the spec).
CLAUDE_CODE_X = {
    "cc_bash_tools", "cc_bash_persist_trim", "cc_mcp_truncation_notice",
    "cc_mcp_precheck_factor", "cc_persist_overrides", "cc_preview_cut", "cc_read_cap",
    "cc_microcompact_trigger", "cc_microcompact_gap_minutes", "cc_microcompact_count_trigger",
    "cc_microcompact_tools", "cc_summary_reserve_tokens", "cc_autocompact_mode",
    "cc_token_source",
}
# §2.5.9: values the stacked profiles set that are ctxsim's.
CONTEXT_EDITING_X = {"thinking_keep", "trigger", "clear_at_least", "clear_tool_inputs"}


def test_the_claude_code_x_defaults_are_flagged_and_no_other_cc_parameter_is():
    flagged = {n for n, spec in PARAMS.items() if spec.undocumented_by == "Anthropic"}
    assert flagged == CLAUDE_CODE_X
    assert all(PARAMS[n].default_note == NOTE for n in CLAUDE_CODE_X)
    assert PARAMS["summary_placeholder_tokens"].default_note.startswith("ctxsim's default")
    # Documented (or sourced) defaults carry no note.
    for name in ("cc_persist_threshold_chars", "cc_autocompact_buffer_tokens",
                 "cc_microcompact_placeholder", "cc_bash_mode", "claude_env"):
        assert PARAMS[name].default_note == ""


def test_each_claude_code_profile_notes_its_x_values():
    for name in ("claude-code", "claude-code-thinking", "claude-code-context-editing"):
        profile = PROFILES[name]
        noted = {n for n in params_of(profile.stages) if profile.default_note(n) == NOTE}
        expected = CLAUDE_CODE_X | ({"thinking_keep"} if name == "claude-code-thinking"
                                    else CONTEXT_EDITING_X if "editing" in name else set())
        assert noted == expected, name
    recorded = PROFILES["claude-code-recorded"]
    # The recorded profile's own values replay the transcript: not ctxsim's guesses.
    assert recorded.default_note("cc_autocompact_mode") == ""
    assert recorded.default_note("cc_bash_tools") == NOTE
    # The same parameters outside the stacked profiles are documented defaults.
    assert PROFILES["anthropic-context-management"].default_note("thinking_keep") == ""
