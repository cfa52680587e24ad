"""Claude Code settings.json and the Anthropic request fragment: export then import gives
back every value the format carries (SPEC-agents §2.5.9)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxsim.pipeline.agent_settings import CLAUDE_ENV_KEYS
from ctxsim.pipeline.export import export_profile, import_anthropic
from ctxsim.pipeline.export_agents import (
    anthropic_stages,
    claude_code_ignored_keys,
    import_claude_code,
)
from ctxsim.pipeline.params import ParamError
from ctxsim.pipeline.profiles import resolve

env_values = st.dictionaries(st.sampled_from(CLAUDE_ENV_KEYS),
                             st.text(alphabet=' 0123456789.+-k"\\ée', min_size=1, max_size=8))


@given(env_values)
def test_claude_env_round_trips_as_typed(env) -> None:
    (export,) = export_profile(resolve("claude-code", {"claude_env": env}))
    assert export.tool == "claude-code" and export.filename == "settings.json"
    assert import_claude_code(export.content) == {"claude_env": env}
    assert list(json.loads(export.content)["env"]) == sorted(env)


def test_claude_code_export_lists_what_it_left_out_and_warns_about_the_override() -> None:
    (export,) = export_profile(resolve("claude-code", {
        "claude_env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}, "cc_bash_mode": "middle"}))
    assert json.loads(export.content) == {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}}
    assert 'cc_bash_mode = "middle"' in export.left_out
    # Claude Code has no setting for microcompact: all six are always listed.
    assert sum(x.startswith("cc_microcompact_") for x in export.left_out) == 6
    assert any("#36381" in n for n in export.notes)


def test_claude_code_import_reads_env_and_ignores_the_other_settings() -> None:
    text = '{"model": "opus", "env": {"DISABLE_AUTO_COMPACT": "1"}}'
    assert import_claude_code(text) == {"claude_env": {"DISABLE_AUTO_COMPACT": "1"}}
    assert claude_code_ignored_keys(text) == ["model (not a setting ctxsim simulates; ignored)"]
    with pytest.raises(ParamError, match="NOPE: unknown key"):
        import_claude_code('{"env": {"NOPE": "1"}}')
    with pytest.raises(ParamError, match="expected a string"):
        import_claude_code('{"env": {"BASH_MAX_OUTPUT_LENGTH": 5}}')


anthropic_values = st.fixed_dictionaries({
    "compact_trigger": st.builds(lambda n: {"type": "input_tokens", "value": n},
                                 st.integers(50000, 10_000_000)),
    "compact_instructions": st.one_of(st.none(), st.text(max_size=20)),
    "compact_pause_after_compaction": st.booleans(),
    "thinking_keep": st.one_of(st.just("all"), st.builds(
        lambda n: {"type": "thinking_turns", "value": n}, st.integers(1, 100000))),
    "trigger": st.builds(lambda n: {"type": "input_tokens", "value": n}, st.integers(0, 10**6)),
    "keep": st.builds(lambda n: {"type": "tool_uses", "value": n}, st.integers(0, 50)),
})


@given(anthropic_values)
def test_the_anthropic_request_fragment_round_trips(values) -> None:
    (export,) = export_profile(resolve("anthropic-context-management", values))
    back = import_anthropic(export.content)
    assert {k: back[k] for k in values} == values
    assert anthropic_stages(back) == (("anthropic_compact", "gateway"),
                                      ("clear_thinking", "gateway"),
                                      ("clear_tool_uses", "gateway"))


def test_the_fragment_orders_edits_as_the_api_needs_and_lists_betas() -> None:
    cfg = resolve("anthropic-context-management", stages=[
        ["clear_thinking", "gateway"], ["clear_tool_uses", "gateway"],
        ["anthropic_compact", "gateway"]])
    (export,) = export_profile(cfg)
    data = json.loads(export.content)
    assert [e["type"] for e in data["context_management"]["edits"]] == [
        "compact_20260112", "clear_thinking_20251015", "clear_tool_uses_20250919"]
    assert data["betas"] == ["compact-2026-01-12", "context-management-2025-06-27"]
    assert any("order" in n for n in export.notes)
    assert data["context_management"]["edits"][0] == {
        "type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150000},
        "pause_after_compaction": False}


def test_compact_alone_needs_only_its_beta() -> None:
    (export,) = export_profile(resolve("anthropic-compact", {
        "compact_instructions": "keep file names"}))
    data = json.loads(export.content)
    assert data["betas"] == ["compact-2026-01-12"]
    assert data["context_management"]["edits"][0]["instructions"] == "keep file names"
    assert import_anthropic(export.content)["compact_instructions"] == "keep file names"


def test_a_stacked_claude_code_profile_exports_one_artefact_per_tool() -> None:
    exports = export_profile(resolve("claude-code-context-editing"))
    assert [e.tool for e in exports] == ["claude-code", "anthropic"]
    back = import_anthropic(exports[1].content)
    assert back["thinking_keep"] == "all"
    assert back["clear_at_least"] == {"type": "input_tokens", "value": 140000}


def test_a_compact_trigger_below_the_api_minimum_is_rejected() -> None:
    text = json.dumps({"context_management": {"edits": [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 49999}}]}})
    with pytest.raises(ParamError, match="at least 50000"):
        import_anthropic(text)
    with pytest.raises(ParamError) as exc:
        resolve("anthropic-compact", {"compact_trigger": {"type": "input_tokens",
                                                          "value": 49999}})
    assert exc.value.errors["compact_trigger"] == (
        "compact_trigger.value must be at least 50000 (the API rejects smaller triggers)")


def test_the_bare_clear_tool_uses_format_still_imports() -> None:
    (export,) = export_profile(resolve("anthropic-clear-tool-uses"))
    assert "betas" not in json.loads(export.content)
    assert import_anthropic(export.content)["keep"] == {"type": "tool_uses", "value": 3}
