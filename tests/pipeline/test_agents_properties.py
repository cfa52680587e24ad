"""Property tests (hypothesis) of the agent stages' invariants (issue 16): after
`clear_thinking` no thinking outside the kept turns; after `anthropic_compact` the view starts
at the compaction block; after any compaction every result keeps its call and every call its
results; with and without stage memos the replay is the same."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.agents_common import is_recorded_summary, leading_system_len
from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.replay import Replay
from ctxsim.pipeline.stages import clear_thinking
from ctxsim.pipeline.trace import history_json

from .helpers import ctx

TOOLS = ("Read", "Bash", "Grep", "Task", "mcp__web__fetch")


@st.composite
def transcripts(draw) -> list[Message]:
    """Well-formed agent transcripts: an optional system prompt, then turns of a user
    message and tool loops (each call answered right after its assistant message)."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.of("system", "be brief"))
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        # Now and then the turn opens with a recorded Claude Code summary.
        meta = ({"compaction": {"source": "claude-code", "kind": "summary",
                                "trigger": draw(st.sampled_from(["auto", "manual"]))}}
                if draw(st.integers(0, 4)) == 0 else {})
        out.append(Message.of("user", "u" * draw(st.integers(1, 300)),
                              agent_feedback=draw(st.booleans()) and bool(out), meta=meta))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 2))):
                n += 1
                calls.append(ToolCall(f"c{n}", draw(st.sampled_from(TOOLS)), "{}"))
            thinking = draw(st.lists(st.sampled_from(["t" * 40, "", "hmm"]), max_size=2))
            out.append(Message.of("assistant", "", tool_calls=calls,
                                  meta={"thinking": thinking}))
            out.extend(Message.of("tool", "r" * draw(st.integers(0, 400)), tool_call_id=c.id)
                       for c in calls)
        thinking = draw(st.lists(st.sampled_from(["t" * 40, ""]), max_size=1))
        out.append(Message.of("assistant", "a" * draw(st.integers(0, 200)),
                              meta={"thinking": thinking}))
    if draw(st.booleans()):
        out.append(Message.of("user", "more"))
    return out


def assert_paired(h: Sequence[Message]) -> None:
    """Every tool result follows an assistant message of the same history that made its
    call, and every call of a message that is not the last assistant has its result."""
    calls_before: set[str] = set()
    pending: set[str] = set()
    for m in h:
        if m.role == "assistant":
            assert not pending, f"calls without results: {pending}"
            ids = {c.id for c in m.tool_calls}
            calls_before |= ids
            pending = set(ids)
        elif m.role == "tool":
            assert m.tool_call_id in calls_before, f"result {m.tool_call_id} without its call"
            pending.discard(m.tool_call_id)


@given(transcripts(), st.one_of(st.just("all"), st.integers(1, 4)))
def test_after_clear_thinking_no_thinking_is_left_outside_the_kept_turns(h, keep) -> None:
    value = keep if keep == "all" else {"type": "thinking_turns", "value": keep}
    out = clear_thinking.run(h, ctx("claude-code-thinking", thinking_keep=value)).history
    turns = clear_thinking.thinking_turns(h)
    kept = {i for t in (turns if keep == "all" else turns[max(0, len(turns) - keep):])
            for i in t}
    for i, m in enumerate(out):
        if i not in kept:
            assert not m.meta.get("thinking")
        elif m.meta.get("thinking"):
            assert m.meta["thinking_counted"] is True
        assert (m.role, m.content, m.tool_calls) == (h[i].role, h[i].content, h[i].tool_calls)


def _replay(h: list[Message], profile: str, config: dict, use_memos: bool = True) -> list:
    rc = resolve(profile, {"counter": "bytes4", **config})
    return list(Replay(h, rc, use_memos=use_memos).calls())


@settings(max_examples=60)
@given(transcripts(), st.integers(100, 600))
def test_after_autocompact_the_history_stays_paired_and_starts_with_the_summary(h, window
                                                                                 ) -> None:
    config = {"cc_context_window": window, "cc_max_output_tokens": 10,
              "cc_autocompact_buffer_tokens": 0, "summary_placeholder_tokens": 20}
    for call in _replay(h, "claude-code", config):
        run = next(r for r in call.stages if r.stage == "claude_code_autocompact")
        out = run.history
        assert_paired(out)
        if run.report["compactions_so_far"]:
            lead = leading_system_len(out)
            assert (out[lead].meta.get("kind") == "placeholder_summary"
                    or is_recorded_summary(out[lead]))
            assert out[lead].role == "user"
        assert not any(is_recorded_summary(m) for m in out[leading_system_len(out) + 1:])


@settings(max_examples=60)
@given(transcripts(), st.integers(0, 300))
def test_after_anthropic_compact_the_first_message_is_the_compaction_block(h, extra) -> None:
    # The smallest trigger the API accepts, reached by one long first message.
    lead = leading_system_len(h)
    h = [*h[:lead], Message.of("user", "z" * (4 * (50000 + extra))), *h[lead:]]
    compacted = False
    for call in _replay(h, "anthropic-compact", {"compact_trigger": {
            "type": "input_tokens", "value": 50000}, "summary_placeholder_tokens": 0}):
        run = call.stages[0]
        out = run.history
        assert_paired(out)
        compacted = compacted or run.report["applied"]
        if compacted:
            lead = leading_system_len(out)
            assert out[lead].meta.get("kind") == "compaction_block"
            assert out[lead].role == "assistant"
            assert run.tokens_after < 50000
    assert compacted


@settings(max_examples=40)
@given(transcripts(), st.integers(100, 600))
def test_the_fold_memo_never_changes_a_result(h, window) -> None:
    config = {"cc_context_window": window, "cc_max_output_tokens": 10,
              "cc_autocompact_buffer_tokens": 0, "cc_microcompact_trigger": "count",
              "cc_microcompact_count_trigger": 1, "claude_env": {"BASH_MAX_OUTPUT_LENGTH": "100"}}
    for profile in ("claude-code-thinking", "claude-code-recorded"):
        with_memo = _replay(h, profile, config)
        without = _replay(h, profile, config, use_memos=False)
        assert [history_json(c.sent) for c in with_memo] == [
            history_json(c.sent) for c in without]
        assert [[r.report for r in c.stages] for c in with_memo] == [
            [r.report for r in c.stages] for c in without]
    with_memo = _replay(h, "anthropic-context-management", {})
    without = _replay(h, "anthropic-context-management", {}, use_memos=False)
    assert [history_json(c.sent) for c in with_memo] == [history_json(c.sent) for c in without]
    assert [[r.report for r in c.stages] for c in with_memo] == [
        [r.report for r in c.stages] for c in without]
