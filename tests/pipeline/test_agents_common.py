"""The shared conventions of the agent stages (SPEC-agents §2.5.0), value by value."""

from __future__ import annotations

import math

import pytest

from ctxsim.pipeline import agent_settings as aset
from ctxsim.pipeline import agents_common as ac
from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.stages import StageContext
from ctxsim.pipeline.tokens import get_counter, message_tokens

B4 = get_counter("bytes4")


def test_u16len_counts_astral_characters_twice() -> None:
    assert ac.u16len("abc") == 3
    assert ac.u16len("中") == 1
    assert ac.u16len("a😀b") == 4


def test_u16slice_never_splits_a_surrogate_pair() -> None:
    s = "ab😀cd"  # units: a b [hi lo] c d
    assert ac.u16slice(s, 0, 3) == "ab"  # 3 falls inside the pair: moved down to 2
    assert ac.u16slice(s, 0, 4) == "ab😀"
    assert ac.u16slice(s, 3, 6) == "😀cd"  # start moved down too
    assert ac.u16slice("x" * 10, 2, 5) == "xxx"


def test_rough_estimates_round_halves_up() -> None:
    assert [ac.cc_rough(n) for n in (0, 1, 2, 6, 8, 10)] == [0, 0, 1, 2, 2, 3]
    assert [ac.approx_tokens(b) for b in (0, 1, 4, 5)] == [0, 1, 1, 2]


@pytest.mark.parametrize(("text", "value"), [
    ("12k", 12), (" 7", 7), ("1e5", 1), ("+3", 3), ("-4", -4), ("\u00a040000", 40000),
])
def test_js_parse_int_reads_the_leading_integer(text: str, value: int) -> None:
    assert ac.js_parse_int(text) == value


def test_js_parse_int_gives_nan_without_digits() -> None:
    assert math.isnan(ac.js_parse_int("abc"))
    assert math.isnan(ac.js_parse_int(""))


def test_js_parse_float_reads_the_leading_decimal_literal() -> None:
    assert ac.js_parse_float("0.8") == 0.8
    assert ac.js_parse_float("80%") == 80
    assert ac.js_parse_float(".5e1x") == 5.0
    assert ac.js_parse_float("Infinity") == math.inf
    assert math.isnan(ac.js_parse_float("abc"))


def test_env_truthy_spellings() -> None:
    assert all(ac.is_env_truthy(v) for v in ("1", "true", " YES ", "on"))
    assert not any(ac.is_env_truthy(v) for v in ("", "0", "no", None))


@pytest.mark.parametrize(("n", "text"), [
    (2000, "2KB"), (50000, "48.8KB"), (1280, "1.3KB"), (60, "60 bytes"),
    (1024, "1KB"), (5033165, "4.8MB"), (3 * 1024**3, "3GB"),
])
def test_fmt_size_matches_the_observed_forms(n: int, text: str) -> None:
    assert ac.fmt_size(n) == text


def test_leading_system_block_and_recorded_summary() -> None:
    h = [Message.of("system", "s"), Message.of("system", "d"), Message.of("user", "u"),
         Message.of("user", "sum", meta={"compaction": {"kind": "summary"}})]
    assert ac.leading_system_len(h) == 2
    assert ac.is_recorded_summary(h[3]) and not ac.is_recorded_summary(h[2])
    assert ac.is_real_user(h[2]) and not ac.is_real_user(h[3])


def test_placeholder_reaches_the_target_with_the_fewest_xs() -> None:
    text = ac.placeholder_text("claude_code_autocompact", 3, 259, 1, 60, B4)
    head = ("[ctxsim placeholder summary: claude_code_autocompact summarized 3 items "
            "(259 tokens) at call 1; the transcript has no summary for this point]")
    assert len(head) == 141
    assert text == head + " x" * 48
    assert B4.count(text.encode()) == 60
    assert ac.placeholder_text("s", 1, 1, 0, 0, B4).endswith("this point]")


def test_recorded_compactions_belong_to_the_call_after_their_assistants() -> None:
    msgs = [Message.of("user", "u"), Message.of("assistant", "a"),
            Message.of("user", "S", meta={"compaction": {
                "source": "claude-code", "kind": "summary", "trigger": "auto",
                "pre_tokens": 167648}}),
            Message.of("assistant", "b"),
            Message.of("user", "c", meta={"microcompaction": {"trigger": "auto",
                                                               "pre_tokens": 5}})]
    got = ac.recorded_compactions(msgs)
    assert [(e["source"], e["message_index"], e["call_index"], e["kind"]) for e in got] == [
        ("claude-code", 2, 1, "summary"), ("claude-code", 4, 2, "microcompact")]
    assert got[0]["pre_tokens"] == 167648 and got[0]["summary_present"] is True
    assert ac.recorded_markers(msgs, "compaction", "claude-code")[0][:2] == (2, 1)
    assert ac.call_of_index(msgs, 4) == 2


def _counting_step(log: list[int]):
    def step(state, h, end, j):
        log.append(j)
        return state + end, h[:end], {"j": j, "state": state}
    return step


def test_the_fold_folds_every_prefix_and_the_memo_skips_unchanged_ones() -> None:
    h = [Message.of("user", "u0"), Message.of("assistant", "a0"), Message.of("user", "u1"),
         Message.of("assistant", "a1"), Message.of("user", "u2")]
    log: list[int] = []
    ctx = StageContext({}, B4, memo={})
    r = ac.fold(h[:3], ctx, 0, _counting_step(log))
    assert (r.call, r.state, r.info["state"]) == (1, 0 + 1 + 3, 1)
    assert log == [0, 1]
    log.clear()
    r2 = ac.fold(h, ctx, 0, _counting_step(log))
    assert log == [2]  # steps 0 and 1 (the previous current step) are unchanged: reused
    fresh: list[int] = []
    r3 = ac.fold(h, StageContext({}, B4), 0, _counting_step(fresh))
    assert fresh == [0, 1, 2] and (r2.state, r2.view) == (r3.state, r3.view)
    # A rewrite below a_1 makes step 1 run again.
    log.clear()
    h2 = [h[0].with_content(b"U0"), *h[1:]]
    ac.fold(h2, ctx, 0, _counting_step(log))
    assert log == [0, 1, 2]


def test_claude_env_parse_rules_and_warnings() -> None:
    cases = {"abc": 30000, "200000": 150000, "12k": 12, "0": 30000, " 40000": 40000, "": 30000}
    for typed, want in cases.items():
        assert aset.claude_env_effective({"BASH_MAX_OUTPUT_LENGTH": typed}).bash_max_output == want
    assert aset.claude_env_effective({"BASH_MAX_OUTPUT_LENGTH": "abc"}).warnings == (
        'BASH_MAX_OUTPUT_LENGTH: "abc" is not a positive integer; using 30000',)
    assert aset.claude_env_effective({"BASH_MAX_OUTPUT_LENGTH": "200000"}).warnings == (
        "BASH_MAX_OUTPUT_LENGTH: 200000 is above the ceiling of 150000; using 150000",)
    env = aset.claude_env_effective({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "0.8",
                                   "DISABLE_AUTO_COMPACT": "yes",
                                   "MAX_MCP_OUTPUT_TOKENS": "10"})
    assert (env.pct_override, env.disable_auto_compact, env.mcp_max_tokens) == (0.8, True, 10)
    assert aset.claude_env_effective({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "0"}).pct_override is None


def test_tool_shaped_maps_reject_unknown_keys_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        aset.clean_claude_env({"NOPE": "1"})
    with pytest.raises(ValueError, match="expected a string"):
        aset.clean_claude_env({"BASH_MAX_OUTPUT_LENGTH": 10})
    assert aset.clean_codex_config({"model": "gpt-5", "tool_output_token_limit": 0}) == {
        "model": "gpt-5", "tool_output_token_limit": 0}
    for bad in ({"model_context_window": 0}, {"model_context_window": 1.5},
                {"tool_output_token_limit": "6"}, {"x": 1}):
        with pytest.raises(ValueError):
            aset.clean_codex_config(bad)


def test_thinking_costs_tokens_only_when_counted() -> None:
    plain = Message.of("assistant", "a", meta={"thinking": ["t" * 40, ""]})
    counted = Message.of("assistant", "a", meta={"thinking": ["t" * 40, ""],
                                                 "thinking_counted": True})
    assert message_tokens(counted, B4) - message_tokens(plain, B4) == 10


def test_scenario_messages_carry_meta_verbatim() -> None:
    from ctxsim.pipeline.scenario import ScenarioError, parse_scenario_data

    sc = parse_scenario_data({"messages": [
        {"role": "user", "content": "u", "meta": {"timestamp": "2026-03-01T10:00:00Z"}},
        {"role": "user", "content": "s", "meta": {"compaction": {
            "source": "codex", "kind": "summary",
            "replacement_history": [{"role": "user", "content": "kept"}]}}},
    ]})
    assert sc.messages[0].meta["timestamp"] == "2026-03-01T10:00:00Z"
    nested = sc.messages[1].meta["compaction"]["replacement_history"]
    assert nested[0].role == "user" and nested[0].content == b"kept"
    with pytest.raises(ScenarioError, match=r"messages\[0\].meta: expected an object"):
        parse_scenario_data({"messages": [{"role": "user", "meta": []}]})


def test_a_trace_without_agent_stages_has_no_compaction_lists() -> None:
    from ctxsim.pipeline.replay import replay
    from ctxsim.pipeline.trace import build_trace

    trace = build_trace(replay([Message.of("user", "u")], "none", {"counter": "bytes4"}))
    assert "compactions" not in trace
    marked = [Message.of("user", "s", meta={"compaction": {"source": "claude-code",
                                                           "kind": "summary"}})]
    trace = build_trace(replay(marked, "none", {"counter": "bytes4"}))
    assert trace["compactions"] == []
    assert trace["recorded_compactions"][0]["call_index"] == 0


def test_persisted_results_go_under_the_sessions_project_folder() -> None:
    from ctxsim.pipeline.profiles import resolve
    from ctxsim.pipeline.replay import replay
    from ctxsim.pipeline.spill import MemorySpillSink

    msgs = [Message.of("user", "go"),
            Message.of("assistant", "", tool_calls=[ToolCall("toolu_9", "Grep", "{}")]),
            Message.of("tool", "y" * 60, tool_call_id="toolu_9")]
    config = {"counter": "bytes4", "cc_persist_threshold_chars": 50}
    rep = replay(msgs, "claude-code", config, sink=MemorySpillSink(),
                 session={"cwd": "/work/demo", "session_id": "sess-1"})
    list(rep.calls())
    assert rep.dispatch[0]["spill_path"] == (
        "~/.claude/projects/-work-demo/sess-1/tool-results/toolu_9.txt")
    bare = replay(msgs, "claude-code", config, sink=MemorySpillSink())
    list(bare.calls())
    assert bare.dispatch[0]["spill_path"] == (
        "~/.claude/projects/unknown-project/unknown-session/tool-results/toolu_9.txt")
    assert resolve("claude-code").values["cc_tool_results_dir"].endswith("/tool-results")


@pytest.mark.parametrize(("meta", "where"), [
    ({"thinking": "t"}, "messages[0].meta.thinking: expected an array of strings"),
    ({"timestamp": 5}, "messages[0].meta.timestamp: expected a string"),
    ({"usage": [1]}, "messages[0].meta.usage: expected an object"),
    ({"microcompaction": {"compacted_tool_ids": "c1"}},
     "messages[0].meta.microcompaction.compacted_tool_ids: expected an array of strings"),
])
def test_bad_meta_in_a_scenario_is_one_clear_error(meta, where) -> None:
    from ctxsim.pipeline.scenario import ScenarioError, parse_scenario_data

    with pytest.raises(ScenarioError) as exc:
        parse_scenario_data({"messages": [{"role": "assistant", "meta": meta}]})
    assert str(exc.value) == where
