"""Rules of SPEC-agents-2 beyond its worked examples: OpenCode's kept tail and replayed user
message, recorded compactions of the agents that write their summary as an answer, Gemini
CLI's older eras, and explicit values over an era."""

from __future__ import annotations

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.stages import (
    gemini_compress,
    gemini_tool_output,
    opencode_compact,
    openhands_v1_tool_output,
    roo_condense,
)
from tests.pipeline.test_agents2_reference_cases import call, ctx, gemini_history, rec


def test_opencode_v2_keeps_a_recent_tail_and_replays_the_user_message_mid_turn():
    h = [Message.of("user", "task"), call("k1", 10, name="bash"),
         Message.of("tool", "r" * 4000, tool_call_id="k1"),
         call("k2", 10, name="bash", **rec(170_000, 100)),
         Message.of("tool", "s" * 400, tool_call_id="k2")]
    c = ctx("opencode", {"model": "claude-sonnet-4"}, counter="bytes4",
            opencode_token_source="usage", opencode_keep_tokens=200)
    r = opencode_compact.run(h, c)
    out = list(r.history)
    assert out[0].text == "What did we do so far?" and out[1].role == "assistant"
    assert r.report["replayed_user_message"] and out[2] is h[0]
    assert out[3:] == h[3:]  # the tail within 200 tokens, starting at a call, not a result


def test_a_recorded_opencode_compaction_starts_the_request_at_its_prompt():
    h = [Message.of("user", "task"), Message.of("assistant", "a1"),
         Message.of("user", "What did we do so far?"),
         Message.of("assistant", "the summary",
                    meta={"compaction": {"source": "opencode", "kind": "summary"}}),
         Message.of("user", "next"), Message.of("assistant", "a2")]
    r = opencode_compact.run(h, ctx("opencode", opencode_mode="recorded"))
    assert [m.text for m in r.history] == ["What did we do so far?", "the summary", "next", "a2"]
    before = opencode_compact.run(h[:3], ctx("opencode", opencode_mode="recorded"))
    assert list(before.history) == h[:3]


def test_a_recorded_roo_summary_of_the_destructive_era_leaves_the_file_as_it_is():
    h = [Message.of("user", "task"), Message.of(
        "assistant", "summary", meta={"compaction": {"source": "roo-code", "kind": "summary"}}),
        Message.of("user", "m37"), Message.of("assistant", "m38"), Message.of("user", "m39")]
    r = roo_condense.run(h, ctx("roo-code", roo_mode="recorded"))
    assert list(r.history) == h and r.report["condensations_so_far"] == 1
    # The summary answered call 0; the call after it is where it takes effect, filed under 0.
    at_1 = roo_condense.run(h[:3], ctx("roo-code", roo_mode="recorded"))
    assert at_1.report["compaction_events"][0]["call_index"] == 0


def test_gemini_before_0_29_keeps_the_last_lines_of_a_huge_shell_output():
    lines = "\n".join(f"line {k}" for k in range(600_000))
    h = [call("s1", 30), Message.of("tool", lines, tool_call_id="s1")]
    r = gemini_tool_output.run(h, ctx("gemini-cli", gemini_version="0.20.1"))
    out = r.history[-1].text
    assert out.startswith("Output too large. Showing the last 1,000 of 600,000 lines.\n")
    assert out.endswith("line 599999") and out.count("\n") == 1000
    small = [call("s2", 30), Message.of("tool", "x" * 50_000, tool_call_id="s2")]
    assert gemini_tool_output.run(small, ctx("gemini-cli", gemini_version="0.20.1")
                                  ).history is small


def test_an_explicit_value_wins_over_the_era():
    h = [*gemini_history(50_000, c7_call=False), Message.of("user", "next prompt")]
    h[7] = Message.of("assistant", "m" * 3000, meta=rec(300_000))
    old = ctx("gemini-cli", gemini_token_source="usage", gemini_version="0.14.0")
    assert gemini_compress.run(h, old).report["limit"] == int(0.2 * 1_048_576)
    explicit = ctx("gemini-cli", gemini_token_source="usage", gemini_version="0.14.0",
                   gemini_compression_threshold=0.9)
    assert gemini_compress.run(h, explicit).report["limit"] == int(0.9 * 1_048_576)


def test_a_recorded_gemini_checkpoint_keeps_the_messages_it_names_after_the_summary():
    h = [Message.of("user", "task"), Message.of("assistant", "a1"),
         Message.of("user", "more"), Message.of("assistant", "a2"),
         Message.of("user", "<state_snapshot>s</state_snapshot>", meta={"compaction": {
             "source": "gemini-cli", "kind": "summary", "kept": 2}}),
         Message.of("assistant", "Got it. Thanks for the additional context!"),
         Message.of("user", "go on")]
    r = gemini_compress.run(h, ctx("gemini-cli", gemini_mode="recorded"))
    assert [m.text for m in r.history] == [
        "<state_snapshot>s</state_snapshot>", "Got it. Thanks for the additional context!",
        "more", "a2", "go on"]


def test_openhands_v1_cuts_a_terminal_output_and_names_the_saved_file():
    output = "\n".join(f"line {k}" for k in range(10_000))
    h = [call("t1", 10, name="terminal"), Message.of("tool", output, tool_call_id="t1")]
    c = ctx("openhands-v1", {"session_id": "abc"})
    out = openhands_v1_tool_output.run(h, c).history[-1].text
    assert len(out) == 30_000 and out.startswith("line 0\n")
    assert ("The complete output has been saved to ~/.openhands/conversations/abc/observations/"
            "terminal_output_") in out
    assert "(truncated part starts around line " in out and out.endswith("line 9999")
    assert openhands_v1_tool_output.run([h[0], Message.of("tool", out, tool_call_id="t1")],
                                        c).report["truncated"] is False
    other = [call("e1", 10, name="file_editor"), Message.of("tool", "x" * 60_000,
                                                            tool_call_id="e1")]
    clipped = openhands_v1_tool_output.run(other, c).history[-1].text
    assert len(clipped) == 50_000 and openhands_v1_tool_output.NOTICE in clipped


def test_an_openhands_v1_condensation_request_condenses_half_the_view():
    from ctxsim.pipeline.stages import openhands_v1_condenser
    from tests.pipeline.test_agents2_reference_cases import pairs

    h = [Message.of("system", "sys"), Message.of("user", "task"), *pairs(10, 1),
         Message.of("user", "too long", meta={"openhands_condensation_request": True})]
    r = openhands_v1_condenser.run(h, ctx("openhands-v1"))
    # 23 events: keep 23 // 2 − 2 − 1 = 8 from the tail, naive end 15 lies between a call
    # and its result → forget [2, 16).
    assert r.report["reason"] == "request" and r.report["forgotten_events"] == 14
    out = list(r.history)
    assert out[:2] == h[:2] and out[3:] == h[16:]
    again = openhands_v1_condenser.run([*h, call("z", 4, name="bash")][:-1] + [
        Message.of("assistant", "ok")], ctx("openhands-v1"))
    assert again.report["reason"] is None  # the request was handled by that condensation


def test_a_recorded_roo_sliding_window_hides_what_it_tagged():
    marker = {"compaction": {"source": "roo-code", "kind": "sliding_window"}}
    hidden = {"truncation_parent": "t1"}
    h = [Message.of("user", "task"), Message.of("assistant", "a1", meta=hidden),
         Message.of("user", "u2", meta=hidden),
         Message.of("user", "[Sliding window truncation: 2 messages hidden to reduce context]",
                    meta=marker),
         Message.of("assistant", "a3"), Message.of("user", "u4")]
    r = roo_condense.run(h, ctx("roo-code", roo_mode="recorded"))
    assert [m.text for m in r.history] == [
        "task", "[Sliding window truncation: 2 messages hidden to reduce context]", "a3", "u4"]
    predicted = roo_condense.run(h, ctx("roo-code"))  # far below the limits: not reached
    assert [m.text for m in predicted.history] == ["task", "a1", "u2", "a3", "u4"]


def test_gemini_keeps_its_environment_context_first_after_a_compression():
    from tests.pipeline.test_agents2_reference_cases import gemini_history

    env = Message.of("user", "<session_context>\nThis is the Gemini CLI.\n</session_context>")
    h = [env, *gemini_history(50_000, c7_call=False), Message.of("user", "next prompt")]
    r = gemini_compress.run(h, ctx("gemini-cli", gemini_token_source="usage"))
    out = list(r.history)
    assert out[0] is env and out[1].text.startswith("<state_snapshot>")
    assert [m.text for m in out[2:]] == ["Got it. Thanks for the additional context!",
                                        "next prompt"]


def test_cline_keeps_an_xml_era_result_after_the_range_as_user_text():
    from ctxsim.pipeline.messages import ToolCall
    from ctxsim.pipeline.stages import cline_truncation

    h = [Message.of("user", "<task>")]
    for g in range(1, 41, 2):
        cid = f"cline-{g}"
        h += [Message.of("assistant", "<read_file>", tool_calls=[ToolCall(cid, "read_file")],
                         meta=rec(159_503, 1200) if g == 39 else {}),
              Message.of("tool", f"[read_file for 'f{g}'] Result:", tool_call_id=cid)]
    r = cline_truncation.run(h, ctx("cline", {"model": "claude-sonnet-4"},
                                    cline_token_source="usage"))
    out = list(r.history)
    assert r.report["deleted_range"] == [2, 19]
    assert out[2].role == "user" and out[2].text == "[read_file for 'f19'] Result:"
    assert out[3:] == h[21:]
