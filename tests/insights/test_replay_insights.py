"""Cache, breaks and information loss over real replays: crafted transcripts and a real one."""

from __future__ import annotations

import pytest

from ctxsim import importers
from ctxsim.generator import generate_session
from ctxsim.insights.loss import identifiers
from ctxsim.insights.prices import cache_rule
from ctxsim.insights.report import analyse, call_time
from ctxsim.insights.sweep import (
    Axis,
    SweepError,
    SweepInput,
    SweepPoint,
    axis,
    grid,
    pareto_front,
    run_sweep,
    sweepable,
    with_point,
)
from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.profiles import PROFILES
from ctxsim.pipeline.replay import replay
from tests.factories import lost_path_transcript, read, rereading_transcript
from tests.shared import SHARED_DIR, requires_shared

CLEAR_ALL_BUT_ONE = {"trigger": {"type": "tool_uses", "value": 1},
                     "keep": {"type": "tool_uses", "value": 1}}
def test_a_cleared_result_read_again_is_one_reread_at_the_call_that_asked_for_it():
    rep = replay(rereading_transcript(), "anthropic-clear-tool-uses", CLEAR_ALL_BUT_ONE)
    loss = analyse(rep, cache_rule()).loss
    assert len(loss.rereads) == 1
    reread = loss.rereads[0]
    assert (reread.call, reread.answer) == (2, 6)
    assert reread.dropped.origin == 3 and reread.dropped.call == 2
    assert reread.dropped.how == "replaced" and reread.dropped.tool == "Read"


def test_no_reread_is_reported_when_nothing_was_dropped():
    loss = analyse(replay(rereading_transcript(), "none"), cache_rule()).loss
    assert loss.rereads == [] and loss.drops == [] and loss.lost == []


def test_a_path_only_in_a_dropped_result_mentioned_later_is_a_lost_reference():
    rep = replay(lost_path_transcript(), "anthropic-clear-tool-uses", CLEAR_ALL_BUT_ONE)
    lost = analyse(rep, cache_rule()).loss.lost
    assert [(x.call, x.answer, x.identifier, x.dropped.origin) for x in lost] == [
        (2, 6, "build/generated/schema_v2.go", 3)
    ]


def test_a_path_still_in_what_was_sent_is_not_a_lost_reference():
    rep = replay(lost_path_transcript(user_mentions_it=True), "anthropic-clear-tool-uses",
                 CLEAR_ALL_BUT_ONE)
    assert analyse(rep, cache_rule()).loss.lost == []


def test_identifiers_are_paths_functions_errors_and_long_numbers():
    text = ("see src/app/main.py and util.go: parse_args() raised KeyError at offset 1234567; "
            "call loadConfig(x) or render(y) in 12 seconds")
    assert identifiers(text) >= {"src/app/main.py", "util.go", "parse_args", "KeyError",
                                 "1234567", "loadConfig", "render"}
    assert "seconds" not in identifiers(text) and "12" not in identifiers(text)


def test_the_stage_that_rewrote_the_first_changed_message_is_named():
    rep = replay(rereading_transcript(), "aivax", {"toolContextCount": 1})
    insights = analyse(rep, cache_rule())
    broken = insights.breaks
    assert broken and broken[0].index == 2
    cause = broken[0].cause
    assert (cause.kind, cause.stage, cause.origin, cause.position) == (
        "rewritten", "tool_context", 3, 3)
    assert [e.call for e in insights.events][:1] == [2]


def test_an_anchor_appended_to_every_call_breaks_the_prefix_at_every_call():
    rep = replay(rereading_transcript(), "chatcli", {"anchor_text": "Stay on task."})
    causes = [(c.cause.kind, c.cause.stage) for c in analyse(rep, cache_rule()).calls[1:]]
    # At the last call microcompact rewrites the first result, before the anchor's place.
    assert causes == [("injected", "anchor"), ("injected", "anchor"),
                      ("rewritten", "microcompact")]


def assert_full_prefix_hits(insights, times):
    rule = insights.rule
    checked = 0
    for previous, current, (t0, t1) in zip(insights.calls, insights.calls[1:],
                                           zip(times, times[1:], strict=False), strict=False):
        assert current.cause is None  # append-only: every prompt extends the previous one
        fresh = t0 is None or t1 is None or t1 - t0 <= rule.ttl_seconds
        if previous.input_tokens >= rule.min_tokens and fresh:
            assert current.cached == previous.input_tokens, current
            checked += 1
        elif not fresh:
            assert current.expired
    return checked


def test_none_reads_the_whole_previous_prompt_at_every_call_within_the_lifetime():
    session = generate_session(60, seed=4)  # has 400 s pauses, past the 5-minute lifetime
    rep = replay(session.messages, "none")
    calls = list(replay(session.messages, "none").calls())
    times = [call_time(c, session.messages) for c in calls]
    insights = analyse(rep, cache_rule())
    assert assert_full_prefix_hits(insights, times) > 20
    assert any(c.expired for c in insights.calls)
    hour = analyse(replay(session.messages, "none"), cache_rule(lifetime="1h"))
    assert not any(c.expired for c in hour.calls)


@requires_shared
def test_none_gets_a_full_prefix_hit_on_a_real_transcript():
    path = SHARED_DIR / "transcripts/claude-code-jsonl/agentcmd__full-session-four.jsonl"
    session = importers.load(path).sessions[0]
    calls = list(replay(session.messages, "none").calls())
    times = [call_time(c, session.messages) for c in calls]
    assert any(t is not None for t in times)  # the lifetime comes from the transcript
    insights = analyse(replay(session.messages, "none"), cache_rule())
    assert assert_full_prefix_hits(insights, times) >= 5
    assert insights.hit_rate > 0.5


def test_sweepable_parameters_include_chatcli_env_knobs_and_gateway_integers():
    chatcli = [p.name for p in sweepable(PROFILES["chatcli"].stages)]
    assert "env.CHATCLI_TOOL_RESULT_MAX_CHARS" in chatcli
    aivax = [p.name for p in sweepable(PROFILES["aivax"].stages)]
    assert aivax == ["toolContextCount", "contextMaximumSize"]


def test_sweep_axes_and_points():
    assert axis("x", 1000, 3000, 1000).values == (1000, 2000, 3000)
    with pytest.raises(SweepError):
        axis("x", 5, 1, 1)
    with pytest.raises(SweepError):
        axis("x", 0, 100, 1)  # too many values
    assert grid([Axis("a", (1, 2)), Axis("b", (7,))]) == [{"a": 1, "b": 7}, {"a": 2, "b": 7}]
    assert with_point({"env": {"X": "1"}}, {"env.CHATCLI_Y": 5, "toolContextCount": 2}) == {
        "env": {"X": "1", "CHATCLI_Y": "5"}, "toolContextCount": 2}


def test_the_pareto_front_keeps_only_points_nothing_beats():
    def p(tokens, cost, lost):
        return SweepPoint({}, sent_tokens=tokens, cost=cost, lost_references=lost)

    points = [p(100, 1.0, 5), p(200, 0.5, 5), p(150, 1.5, 6), p(100, 1.0, 5), p(300, 2.0, 0)]
    # 2 loses to 0 on every axis; 0 and 3 are equal, so neither beats the other.
    assert pareto_front(points) == [0, 1, 3, 4]


def test_a_two_parameter_sweep_reports_progress_and_marks_its_front():
    session = generate_session(30, seed=2)
    source = SweepInput(session.messages, "aivax")
    seen = []
    points = run_sweep(source, [axis("toolContextCount", 1, 3, 1),
                                axis("contextMaximumSize", 20000, 40000, 20000)],
                       cache_rule(), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 6) for n in range(1, 7)]
    assert [pt.values for pt in points][:2] == [
        {"toolContextCount": 1, "contextMaximumSize": 20000},
        {"toolContextCount": 1, "contextMaximumSize": 40000}]
    assert any(pt.front for pt in points)
    assert len({pt.sent_tokens for pt in points}) > 1


def generic_name_transcript() -> list[Message]:
    """`useState` is in every component read; `fetchUserProfile` only in the first result."""
    def component(n: int, extra: str = "") -> str:
        return (f"import {{ useState }} from 'react';\nexport function Panel{n}() {{\n"
                f"  const [open, setOpen] = useState(false);{extra}\n}}\n")
    messages = [Message.of("system", "You are a coding agent."), Message.of("user", "Fix it.")]
    for n in range(6):
        extra = "\n  fetchUserProfile(id);" if n == 0 else ""
        messages += [
            Message.of("assistant", "", tool_calls=[read(f"r{n}", f"src/Panel{n}.tsx")]),
            Message.of("tool", component(n, extra), tool_call_id=f"r{n}"),
        ]
    messages += [  # the one result kept holds neither name
        Message.of("assistant", "", tool_calls=[ToolCall("ls", "Bash", '{"command": "ls"}')]),
        Message.of("tool", "Panel0.tsx\nPanel1.tsx", tool_call_id="ls"),
        Message.of("assistant", "Panel0 calls fetchUserProfile inside render and useState twice."),
    ]
    return messages


def test_a_name_found_in_many_results_is_generic_and_never_a_lost_reference():
    """Issue 19: lost-reference lists skip words that occur in many unrelated results."""
    rep = replay(generic_name_transcript(), "anthropic-clear-tool-uses", CLEAR_ALL_BUT_ONE)
    lost = {x.identifier for x in analyse(rep, cache_rule()).loss.lost}
    assert "fetchUserProfile" in lost
    assert "useState" not in lost
