"""The worked examples of SPEC-agents-2, one test each, on the stages themselves (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.profiles import default_profile_for
from ctxsim.pipeline.stages import (
    aider_summarize,
    cline_truncation,
    gemini_compress,
    gemini_mask,
    gemini_tool_output,
    mini_swe_output,
    opencode_compact,
    opencode_prune,
    openhands_v1_condenser,
    roo_condense,
)
from ctxsim.pipeline.stages._opencode import CLEARED, usable
from tests.pipeline.helpers import ctx as make_ctx


def ctx(profile: str, session: dict[str, Any] | None = None, **config: Any):
    return replace(make_ctx(profile, **config), session=session or {})


def rec(total_input: int, output: int = 0) -> dict[str, Any]:
    return {"recorded": {"total_input": total_input, "input": None, "cache_read": None,
                         "cache_write": None, "output": output, "reasoning": None}}


def call(cid: str, size: int = 2, name: str = "run_shell_command", **meta: Any) -> Message:
    """A model content with one function call whose name + arguments are `size` units."""
    return Message.of("assistant", "", tool_calls=[ToolCall(cid, name, "x" * (size - len(name)))],
                      meta=meta)


def texts(out) -> list[str]:
    return [m.text for m in out]


# --- Gemini CLI (§1.5) ---------------------------------------------------------------------


def gemini_history(c6: int, c7_call: bool) -> list[Message]:
    c7 = (call("c7", 500, **rec(530_000)) if c7_call
          else Message.of("assistant", "m" * 3000, meta=rec(530_000)))
    return [Message.of("user", "u" * 1000), call("c1", 500),
            Message.of("tool", "r" * 40_000, tool_call_id="c1"),
            Message.of("assistant", "m" * 2000), Message.of("user", "u" * 1500),
            call("c5", 500), Message.of("tool", "r" * c6, tool_call_id="c5"), c7]


def test_g1_everything_goes_to_the_summary_when_the_history_ends_on_a_model_answer():
    h = [*gemini_history(50_000, c7_call=False), Message.of("user", "next prompt")]
    c = ctx("gemini-cli", {"model": "gemini-2.5-pro"}, gemini_token_source="usage")
    r = gemini_compress.run(h, c)
    assert r.report["limit"] == 524_288 and r.report["tokens_before"] == 530_000
    assert r.report["split"] == 8 and r.report["truncated_responses"] == 0
    assert r.report["compacted"] and r.report["summary_source"] == "placeholder"
    out = texts(r.history)
    assert out[0].startswith("<state_snapshot>\n[ctxsim placeholder summary: gemini_compress "
                             "summarized 8 items")
    assert out[1:] == ["Got it. Thanks for the additional context!", "next prompt"]
    assert r.report["compaction_events"][0]["kind"] == "predicted"


def test_g1_below_the_threshold_nothing_changes():
    h = [*gemini_history(50_000, c7_call=False), Message.of("user", "next prompt")]
    h[7] = Message.of("assistant", "m" * 3000, meta=rec(524_287))
    r = gemini_compress.run(h, ctx("gemini-cli", gemini_token_source="usage"))
    assert not r.report["compacted"] and list(r.history) == h


def test_g2_mid_tool_loop_the_budget_truncates_the_big_response_and_the_split_is_at_c4():
    h = [*gemini_history(240_000, c7_call=True),
         Message.of("tool", "result of c7", tool_call_id="c7")]
    r = gemini_compress.run(h, ctx("gemini-cli", gemini_token_source="usage"))
    assert r.report["split"] == 4 and r.report["truncated_responses"] == 1
    out = list(r.history)
    assert out[1].text == "Got it. Thanks for the additional context!"
    assert out[2] is h[4] and out[3] is h[5] and out[5] is h[7] and out[6] is h[8]
    c6 = out[4].text
    assert c6.startswith("Output too large. Showing first 8,000 and last 32,000 characters. "
                         "For full output see: ")
    assert "... [200,000 characters omitted] ..." in c6
    assert 40_000 < len(c6) < 40_300


def test_g2_without_the_budget_era_nothing_is_truncated():
    h = [*gemini_history(240_000, c7_call=True),
         Message.of("tool", "result of c7", tool_call_id="c7")]
    r = gemini_compress.run(h, ctx("gemini-cli", gemini_token_source="usage",
                                   gemini_version="0.25.0"))
    assert r.report["truncated_responses"] == 0 and r.report["era"].startswith("Gemini CLI 0.18")


def masking_history(r1: int) -> list[Message]:
    sizes = [r1, 25_000, 15_000, 30_000]  # estimated tokens, oldest first
    h: list[Message] = [Message.of("user", "task")]
    for n, tokens in enumerate(sizes, 1):
        h += [call(f"r{n}", 20, name="read_file"),
              Message.of("tool", "y" * (4 * tokens), tool_call_id=f"r{n}")]
    return [*h, call("r5", 20), Message.of("tool", "z" * 400_000, tool_call_id="r5")]


def test_g3_outputs_past_the_protected_50k_are_masked_when_they_reach_30k():
    h = masking_history(20_000)
    r = gemini_mask.run(h, ctx("gemini-cli"))
    # Each part also counts (name + the JSON wrapper) / 4 = 5 tokens: 25,005 + 20,005.
    assert r.report["prunable_tokens"] == 45_010 and r.report["masked"] == 2
    assert r.changed == (2, 4)
    masked = r.history[2].text
    assert masked.startswith("<tool_output_masked>\nyyyy") and masked.endswith(
        "</tool_output_masked>")
    assert "\n... [TRUNCATED] ...\n" in masked and "Full output available at: " in masked
    assert r.history[6] is h[6] and r.history[10] is h[10]  # protected; the latest turn
    again = gemini_mask.run(r.history, ctx("gemini-cli"))
    assert again.report["masked"] == 0  # masked outputs are never counted again


def test_g3_below_the_minimum_nothing_is_masked():
    h = masking_history(4_000)
    r = gemini_mask.run(h, ctx("gemini-cli"))
    assert r.report["prunable_tokens"] == 29_010 and r.report["masked"] == 0
    assert r.history is h


def test_gemini_tool_output_keeps_a_fifth_head_and_the_rest_tail():
    h = [call("s1", 30, **rec(1_040_000)),
         Message.of("tool", "a" * 50_000 + "b" * 50_000, tool_call_id="s1")]
    r = gemini_tool_output.run(h, ctx("gemini-cli"))
    # T = min(4 × (1,048,576 − 1,040,000), 40,000) = 34,304
    assert r.report["limit_chars"] == 34_304
    out = r.history[-1].text
    assert out.startswith("Output too large. Showing first 6,860 and last 27,444 characters.")
    assert "... [65,696 characters omitted] ..." in out
    assert gemini_tool_output.run([h[0], r.history[-1]], ctx("gemini-cli")).report[
        "truncated"] is False


def test_gemini_tool_output_leaves_other_tools_alone():
    h = [call("s1", 20, name="read_file"), Message.of("tool", "a" * 100_000,
                                                       tool_call_id="s1")]
    assert gemini_tool_output.run(h, ctx("gemini-cli")).history is h


# --- OpenHands V1 (§2.3) -------------------------------------------------------------------


def pairs(n: int, start: int, obs: str = "ok") -> list[Message]:
    out: list[Message] = []
    for k in range(start, start + n):
        out += [call(f"t{k}", 4, name="bash"), Message.of("tool", obs, tool_call_id=f"t{k}")]
    return out


def test_o1_eighty_one_events_condense_to_thirty_nine():
    h = [Message.of("system", "sys"), Message.of("user", "task"), call("a0", 4, name="bash"),
         Message.of("tool", "ok", tool_call_id="a0"), Message.of("user", "more"),
         *pairs(38, 1)]
    assert len(h) == 81
    c = ctx("openhands-v1", openhands_v1_max_size=80, openhands_v1_keep_first=4)
    r = openhands_v1_condenser.run(h, c)
    assert r.report["reason"] == "events" and r.report["forgotten_events"] == 43
    out = list(r.history)
    assert len(out) == 39 and out[:4] == h[:4] and out[5:] == h[47:]
    assert out[4].meta["kind"] == "placeholder_summary"
    # 42 more events: 81 again, and the summary (at position 4) is forgotten with the rest.
    h2 = h + pairs(21, 100)
    r2 = openhands_v1_condenser.run(h2, c)
    assert r2.report["compacted"] and len(r2.history) == 39
    summaries = [m for m in r2.history if m.meta.get("kind") == "placeholder_summary"]
    assert len(summaries) == 1 and "at call 60;" in summaries[0].text


def test_o2_the_token_cap_forgets_the_shortest_prefix_past_half_the_cap():
    from ctxsim.pipeline.tokens import full_prompt_tokens, get_counter

    # bytes4: an observation of 4·(t − 4) bytes with a 4-char id costs t tokens. The first
    # 35 pairs hold 106,750 tokens: past 205,000 − 100,000 at the 70th event, not before.
    h = [Message.of("system", "sys"), Message.of("user", "task")]
    for k in range(74):
        tokens = 3047 if k < 35 else 2400
        h += [call(f"t{k:03d}"[-4:], 4, name="bash"),
              Message.of("tool", "o" * (4 * (tokens - 4)), tool_call_id=f"t{k:03d}"[-4:])]
    counter = get_counter("bytes4")
    last = 205_000 - full_prompt_tokens(h[:-1], counter)
    h[-1] = Message.of("tool", "o" * (4 * (last - 4)), tool_call_id=h[-1].tool_call_id)
    assert full_prompt_tokens(h, counter) == 205_000
    assert full_prompt_tokens(h[:-2], counter) <= 200_000  # no earlier call was over the cap
    c = ctx("openhands-v1", counter="bytes4", openhands_v1_max_tokens=200_000)
    r = openhands_v1_condenser.run(h, c)
    assert r.report["tokens_before"] == 205_000 and r.report["reason"] == "tokens"
    assert r.report["forgotten_events"] == 70
    out = list(r.history)
    assert out[:2] == h[:2] and out[3:] == h[72:] and len(out) == 81


def test_the_v1_token_cap_defaults_to_the_agent_models_input_limit():
    from ctxsim.pipeline.stages.openhands_v1_condenser import token_cap

    assert token_cap({}, {"model": "anthropic/claude-sonnet-4-5"}) == 200_000
    assert token_cap({"openhands_v1_max_tokens": 150_000}, {"model": "gpt-5"}) == 150_000
    assert token_cap({}, {"model": "some-local-model"}) is None
    assert token_cap({}, {"model": "x", "model_context_window": 32_768}) == 32_768


def test_o2_an_empty_range_under_a_token_cap_resets_the_whole_view():
    h = [Message.of("system", "s"), Message.of("user", "u" * 4000),
         Message.of("assistant", "", tool_calls=[ToolCall(f"b{k}", "bash", "{}")
                                                 for k in range(3)]),
         *[Message.of("tool", "o" * 4000, tool_call_id=f"b{k}") for k in range(3)]]
    # keep_first = 3 ends inside the tool batch: no range can start before the view's end.
    c = ctx("openhands-v1", counter="bytes4", openhands_v1_max_tokens=3000,
            openhands_v1_keep_first=3)
    r = openhands_v1_condenser.run(h, c)
    assert r.report["hard_reset"] and [m.meta.get("kind") for m in r.history] == [
        "placeholder_summary"]


# --- Cline (§3.3) --------------------------------------------------------------------------


def cline_history(groups: int, usage: dict[int, tuple[int, int]]) -> list[Message]:
    """`groups` API messages: the task, then assistant/tool pairs (odd = assistant)."""
    h = [Message.of("user", "<task>")]
    for g in range(1, groups, 2):
        meta = rec(*usage[g]) if g in usage else {}
        h += [call(f"c{g}", 10, name="read_file", **meta),
              Message.of("tool", f"result {g}", tool_call_id=f"c{g}")]
    return h


def test_c1_first_truncation_keeps_the_first_pair_and_the_last_half():
    h = cline_history(41, {39: (3 + 2000 + 157_500, 1200)})
    c = ctx("cline", {"model": "claude-sonnet-4-5"}, cline_token_source="usage")
    r = cline_truncation.run(h, c)
    assert r.report["limit"] == 160_000 and r.report["tokens_before"] == 160_703
    assert r.report["keep"] == "half" and r.report["deleted_range"] == [2, 19]
    out = list(r.history)
    assert out[0] is h[0] and out[1].text == cline_truncation.NOTICE
    # message 20's tool results are stripped; 21…40 follow
    assert out[2:] == h[21:] and len(out) == 22


def test_c2_a_second_truncation_extends_the_range_from_its_end():
    usage = {39: (159_503, 1200), **dict.fromkeys(range(41, 59, 2), (100000, 500)),
             59: (160_000, 1000)}
    h = cline_history(61, usage)
    r = cline_truncation.run(h, ctx("cline", {"model": "claude-opus-4"},
                                    cline_token_source="usage"))
    assert r.report["deleted_range"] == [2, 39] and r.report["truncations_so_far"] == 2
    assert list(r.history)[2:] == h[41:]


def test_a_recorded_cline_range_is_replayed_at_its_call():
    h = cline_history(41, {})
    h[40] = Message.of("tool", "result 39", tool_call_id="c39", meta={"compaction": {
        "source": "cline", "kind": "truncation", "deleted_range": [2, 19]}})
    r = cline_truncation.run(h, ctx("cline", cline_mode="recorded"))
    assert r.report["deleted_range"] == [2, 19] and r.report["trigger"] == "recorded"
    assert r.report["compaction_events"][0]["kind"] == "recorded"
    later = cline_truncation.run([*h, call("c41", 10), Message.of("tool", "r", tool_call_id="c41")],
                                 ctx("cline", cline_mode="recorded"))
    assert later.report["deleted_range"] == [2, 19] and "compaction_events" not in later.report
    predicted = cline_truncation.run(h, ctx("cline"))
    assert predicted.report["compaction_events"][0]["kind"] == "recorded_not_predicted"
    assert predicted.report["deleted_range"] is None


def test_c2_the_quarter_rule_after_a_switch_to_a_64k_model():
    assert cline_truncation.max_allowed(64_000) == 37_000
    assert cline_truncation.max_allowed(1_000_000) == 960_000
    assert 120_000 / 2 > 37_000  # keep a quarter
    assert cline_truncation.next_range(39, 63, "quarter") == 55


# --- Roo Code (§4.3) -----------------------------------------------------------------------


def roo_history(n: int, last_usage: tuple[int, int], last_tokens: int) -> list[Message]:
    h = [Message.of("system", "sys"), Message.of("user", "task")]
    while len(h) < n:  # alternate assistant / user up to n − 1 messages, then the new one
        role = "assistant" if h[-1].role == "user" else "user"
        h.append(Message.of(role, f"{role} {len(h)}"))
    h = h[:n]
    last_assistant = max(i for i, m in enumerate(h) if m.role == "assistant")
    h[last_assistant] = Message.of("assistant", h[last_assistant].text, meta=rec(*last_usage))
    return [*h, Message.of("user", "n" * (4 * (last_tokens - 3)))]


def test_r1_fresh_start_condenses_past_the_allowed_size_below_the_percent():
    h = roo_history(61, (166_900, 1_100), 5_000)
    c = ctx("roo-code", {"model": "claude-sonnet-4"}, counter="bytes4",
            roo_token_source="usage")
    r = roo_condense.run(h, c)
    assert r.report["limit"] == 171_808 and r.report["tokens_before"] == 173_000
    assert r.report["percent"] == 86.5 and r.report["action"] == "condense"
    out = list(r.history)
    assert out[0] is h[0] and len(out) == 2
    assert out[1].text.startswith("## Conversation Summary\n[ctxsim placeholder summary")


def test_r1_the_sliding_window_hides_half_behind_a_marker():
    h = roo_history(61, (166_900, 1_100), 5_000)  # 1 system + 61 visible messages
    c = ctx("roo-code", {"model": "claude-sonnet-4"}, counter="bytes4",
            roo_token_source="usage", roo_auto_condense=False)
    r = roo_condense.run(h, c)
    out = list(r.history)
    assert r.report["action"] == "sliding_window"
    assert out[1] is h[1]
    assert out[2].text == "[Sliding window truncation: 30 messages hidden to reduce context]"
    assert out[3:] == h[32:]


def test_r2_before_3_30_the_first_message_a_summary_and_the_last_three_stay():
    h = roo_history(40, (96_500, 0), 1_500)[1:]  # no system prompt; 40 messages
    h = h[:39] + h[39:]
    c = ctx("roo-code", counter="bytes4", roo_token_source="usage", roo_version="3.28.7",
            roo_condense_percent=75, roo_context_window=128_000)
    r = roo_condense.run(h, c)
    assert r.report["limit"] == 107_008 and r.report["tokens_before"] == 98_000
    assert r.report["percent"] >= 75 and r.report["era"].startswith("Roo Code ≤ 3.29")
    out = list(r.history)
    assert len(out) == 5 and out[0] is h[0] and out[2:] == h[-3:]
    assert out[1].role == "assistant" and out[1].meta["kind"] == "placeholder_summary"


# --- Aider (§5.3) --------------------------------------------------------------------------


def sized(role: str, tokens: int) -> Message:
    return Message.of(role, "w" * (4 * (tokens - 3)))


def test_a1_gpt4o_keeps_the_tail_under_half_the_limit():
    done = [sized("user", 500), sized("assistant", 1500), sized("user", 300),
            sized("assistant", 2000), sized("user", 400), sized("assistant", 1800),
            sized("user", 200), sized("assistant", 2300)]
    h = [*done, Message.of("user", "the next request")]
    c = ctx("aider", {"model": "gpt-4o"}, counter="bytes4", summary_placeholder_tokens=600)
    r = aider_summarize.run(h, c)
    assert r.report["limit"] == 8000 and r.report["tokens_before"] == 9000
    out = list(r.history)
    assert out[0].text.startswith("I spoke to you previously about a number of things.\n")
    assert out[1:] == [done[6], done[7], h[-1]]


def test_a2_a_split_at_four_or_less_summarises_everything():
    messages = [sized("user", 300), sized("assistant", 800), sized("user", 200),
                sized("assistant", 700), sized("user", 600)]
    sizes = [300, 800, 200, 700, 600]
    summary = Message.of("user", "S")
    out = aider_summarize.summarize(messages, sizes, 2000, lambda items: (summary, 100))
    assert [m for m, _ in out] == [summary]
    assert aider_summarize.history_limit({"aider_max_input_tokens": 32_000}, {}) == 2000
    assert aider_summarize.history_limit({}, {}) == 1024


def test_a2_through_the_stage_an_ok_follows_a_summary_that_ends_on_a_user_message():
    h = [sized("user", 300), sized("assistant", 800), sized("user", 200),
         sized("assistant", 700), Message.of("user", "now")]
    c = ctx("aider", counter="bytes4", aider_max_chat_history_tokens=1500,
            summary_placeholder_tokens=100)
    out = list(aider_summarize.run(h, c).history)
    assert [m.role for m in out] == ["user", "assistant", "user"]
    assert out[1].text == "Ok." and out[2] is h[-1]


# --- OpenCode (§6.3) -----------------------------------------------------------------------


def test_oc1_overflow_at_the_usable_size():
    assert usable({}, {"model": "claude-sonnet-4-5"}) == 168_000
    assert usable({"opencode_input_limit": 272_000, "opencode_max_output": 128_000}, {}) == \
        252_000
    h = [Message.of("user", "task"),
         Message.of("assistant", "done", meta=rec(2 + 160_000 + 6_500, 1_600)),
         Message.of("user", "next")]
    c = ctx("opencode", {"model": "claude-sonnet-4-5"}, opencode_token_source="usage",
            opencode_keep_tokens=0)
    r = opencode_compact.run(h, c)
    assert r.report["tokens_before"] == 168_102 and r.report["compacted"]
    assert texts(r.history)[0] == "What did we do so far?"
    assert r.history[1].meta["kind"] == "placeholder_summary"
    h[1] = Message.of("assistant", "done", meta=rec(166_000, 1_999))
    assert not opencode_compact.run(h, c).report["compacted"]


def prune_history(sizes: list[int]) -> list[Message]:
    h = [Message.of("user", "first")]
    for n, tokens in enumerate(reversed(sizes)):  # oldest first
        h += [call(f"p{n}", 10, name="bash"),
              Message.of("tool", "q" * (4 * tokens), tool_call_id=f"p{n}")]
    return [*h, Message.of("assistant", "answer"), Message.of("user", "second"),
            call("s0", 10, name="bash"), Message.of("tool", "q" * 400_000, tool_call_id="s0"),
            Message.of("assistant", "answer"), Message.of("user", "third")]


def test_oc2_prune_clears_what_lies_past_the_protected_40k():
    h = prune_history([15_000, 20_000, 10_000, 12_000, 9_000])  # newest first
    r = opencode_prune.run(h, ctx("opencode"))
    assert r.report["candidate_tokens"] == 31_000 and r.report["pruned"] == 3
    assert [m.text for m in r.history[1:7] if m.role == "tool"] == [CLEARED] * 3
    assert r.history[8] is h[8] and r.history[10] is h[10]


def test_oc2_prune_below_the_minimum_clears_nothing():
    h = prune_history([15_000, 20_000, 10_000, 8_000])
    r = opencode_prune.run(h, ctx("opencode"))
    assert r.report["candidate_tokens"] == 18_000 and r.history is h


# --- codex exec (§7) and mini-swe-agent (§8) ------------------------------------------------


def test_x2_codex_exec_is_replayed_by_the_codex_profile_at_ninety_percent():
    from ctxsim.pipeline.stages.codex_autocompact import limits

    assert default_profile_for("codex-exec") == "codex"
    c = ctx("codex", codex_config={"model_context_window": 272_000})
    assert limits(c) == (272_000, 244_800)


def test_m1_m2_the_observation_template():
    short = [call("m1", 4, name="bash"), Message.of("tool", "o" * 9_999, tool_call_id="m1")]
    assert mini_swe_output.run(short, ctx("mini-swe-agent")).history is short
    long = [call("m2", 4, name="bash"),
            Message.of("tool", "h" * 5_000 + "m" * 15_000 + "t" * 5_000, tool_call_id="m2")]
    out = mini_swe_output.run(long, ctx("mini-swe-agent")).history[-1].text
    assert out.startswith("<warning>\nThe output of your last command was too long.\n")
    assert "<output_head>\n" + "h" * 5_000 + "\n</output_head>" in out
    assert "<elided_chars>\n15000 characters elided\n</elided_chars>" in out
    assert out.endswith("<output_tail>\n" + "t" * 5_000 + "\n</output_tail>")
    rendered = [long[0], Message.of("tool", out, tool_call_id="m2")]
    assert mini_swe_output.run(rendered, ctx("mini-swe-agent")).history is rendered

