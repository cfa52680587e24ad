"""Property tests (hypothesis) of the invariants issue 3 and 4 list."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.stages import context_limit, pairing
from ctxsim.pipeline.trace import build_trace

from .helpers import ctx

IDS = st.sampled_from(["a", "b", "c", "d", ""])


@st.composite
def message(draw) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]))
    text = draw(st.text(alphabet="xyz\n", max_size=30))
    if role == "assistant":
        ids = draw(st.lists(IDS, max_size=3))
        calls = [ToolCall(i, draw(st.sampled_from(["read", "bash"])), "{}") for i in ids]
        return Message.of("assistant", text, tool_calls=calls)
    if role == "tool":
        return Message.of("tool", text, tool_call_id=draw(IDS))
    return Message.of(role, text)


histories = st.lists(message(), max_size=12)


@given(histories)
def test_after_chatcli_pairing_every_call_is_followed_by_its_results(history) -> None:
    r = pairing.run(history, ctx("chatcli"))
    out = r.history
    for i, m in enumerate(out):
        if m.has_calls:
            ids = [c.id for c in m.tool_calls]
            following = [t.tool_call_id for t in out[i + 1:i + 1 + len(ids)]]
            assert all(t.role == "tool" for t in out[i + 1:i + 1 + len(ids)])
            if r.report["has_repairs"]:
                assert following == ids
            else:
                assert sorted(following) == sorted(ids)
        if m.role == "tool":
            # Every tool message sits in the run right after the assistant that called it.
            j = i
            while out[j].role == "tool":
                j -= 1
                assert j >= 0
            assert m.tool_call_id in [c.id for c in out[j].tool_calls]


@given(histories)
def test_chatcli_docs_pairing_gives_each_call_exactly_one_later_result(history) -> None:
    out = pairing.run(history, ctx("chatcli-docs")).history
    for i, m in enumerate(out):
        for c in m.tool_calls:
            assert [t.tool_call_id for t in out[i + 1:] if t.role == "tool"].count(c.id) == 1
        if m.role == "tool":
            assert any(m.tool_call_id in [c.id for c in a.tool_calls] for a in out[:i])


@given(histories)
def test_pairing_its_own_output_changes_nothing(history) -> None:
    for profile in ("chatcli", "chatcli-docs"):
        once = pairing.run(history, ctx(profile)).history
        again = pairing.run(once, ctx(profile))
        assert again.history == once and not again.report["has_repairs"]


@settings(max_examples=30)
@given(histories, st.sampled_from(["chatcli", "chatcli-docs", "aivax", "chatcli-aivax"]))
def test_replay_is_deterministic(history, profile) -> None:
    config = {"counter": "bytes4"}
    a = build_trace(replay(history, profile, config))
    b = build_trace(replay(history, profile, config))
    assert a == b


@given(histories, st.integers(min_value=0, max_value=60),
       st.sampled_from(["Truncate", "TruncateHard"]))
def test_after_truncate_it_fits_or_nothing_was_removable(history, limit, action) -> None:
    c = ctx("aivax", counter="bytes4", contextMaximumSize=limit, contextOverflowAction=action)
    r = context_limit.run(history, c)
    out = r.history
    from ctxsim.pipeline.tokens import history_tokens

    last_user = max((i for i, m in enumerate(out) if m.role == "user"), default=None)
    removable = [m for i, m in enumerate(out) if m.role != "system" and i != last_user]
    assert history_tokens(out, c.counter) <= limit or not removable
    if action == "TruncateHard" and r.report["tokens_after"] > limit:
        assert r.report["error"] == "context_overflow"


@given(histories, st.integers(min_value=0, max_value=60))
def test_truncation_never_leaves_a_result_without_its_call(history, limit) -> None:
    c = ctx("aivax", counter="bytes4", contextMaximumSize=limit, contextOverflowAction="Truncate")
    r = context_limit.run(history, c)
    removed = set(r.report["removed_indices"])
    kept_owner = {}
    latest: dict[str, int] = {}
    for i, m in enumerate(history):
        for call in m.tool_calls if m.role == "assistant" else ():
            latest[call.id] = i
        if m.role == "tool" and m.tool_call_id in latest:
            kept_owner[i] = latest[m.tool_call_id]
    for result, owner in kept_owner.items():
        if owner in removed:
            assert result in removed


@settings(max_examples=30)
@given(histories, st.sampled_from(["aivax", "anthropic-clear-tool-uses"]))
def test_stateless_stages_never_change_the_next_calls_input(history, profile) -> None:
    config = {"counter": "bytes4", **({"contextMaximumSize": 10} if profile == "aivax" else
                                      {"trigger": {"type": "tool_uses", "value": 0},
                                       "keep": {"type": "tool_uses", "value": 0}})}
    for call in replay(history, profile, config).calls():
        assert call.stages[0].tokens_before == call.raw_tokens
        assert tuple(call.persistent) == call.raw_history


@st.composite
def big_message(draw) -> Message:
    m = draw(message())
    if m.role in ("tool", "user") and draw(st.booleans()):
        size = draw(st.sampled_from([2999, 3000, 3001, 6000, 20001, 26000]))
        m = m.with_content(("q\n" * size).encode()[:size])
        if m.role == "user":
            m = Message.of("user", m.content, agent_feedback=True)
    return m


@settings(max_examples=80)
@given(st.lists(big_message(), max_size=20),
       st.sampled_from(["chatcli", "chatcli-docs", "chatcli-aivax"]),
       st.sampled_from([{}, {"loop_mode": "coder"}, {"anchor_text": "REMINDER"},
                        {"env": {"CHATCLI_MICROCOMPACT_HEAD_CHARS": "2900",
                                 "CHATCLI_MICROCOMPACT_MIN_CONTENT": "100",
                                 "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "30000"}}]))
def test_the_incremental_memos_never_change_a_result(history, profile, extra) -> None:
    config = {"counter": "bytes4", **extra}
    fast = replay(history, profile, config)
    slow = replay(history, profile, config)
    slow.use_memos = False
    slow.memos = None
    assert build_trace(fast) == build_trace(slow)


@settings(max_examples=60)
@given(st.lists(big_message(), max_size=20),
       st.sampled_from(["chatcli", "chatcli-docs", "chatcli-aivax"]),
       st.sampled_from([{}, {"anchor_text": "REMINDER"},
                        {"env": {"CHATCLI_MICROCOMPACT_MIN_CONTENT": "100",
                                 "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "30000"}}]))
def test_the_replays_deltas_name_every_position_a_stage_input_changed_at(
        history, profile, extra) -> None:
    """A `Delta` answers `changed_since` only when it covers every change: checked against a
    full scan of the same two histories, for every stage at every call."""
    replay_checking_deltas(history, profile, {"counter": "bytes4", **extra})


def replay_checking_deltas(history, profile, config) -> list[bool]:
    """Replays with every `changed_since` answer compared with a full scan; returns, per
    answer, whether a `Delta` gave it."""
    from ctxsim.pipeline import stages
    from ctxsim.pipeline.stages import budget, changed_positions, microcompact

    answered = []

    def checked(before, after, c, below=None):
        got = stages.changed_since(before, after, c, below)
        n = len(before) if below is None else below
        assert got == changed_positions(before[:n], after)
        answered.append(c.delta is not None)
        return got

    with pytest.MonkeyPatch.context() as patch:
        for module in (budget, microcompact, pairing):
            patch.setattr(module, "changed_since", checked)
        for _ in replay(history, profile, config).calls():
            pass
    return answered


def test_on_a_well_formed_session_the_stage_memos_read_deltas_not_full_scans() -> None:
    from ctxsim.generator import generate_session

    session = generate_session(60, seed=5, oversize_every=4)
    answered = replay_checking_deltas(session.messages, "chatcli", {"counter": "bytes4"})
    # Three memo lookups per call (microcompact, pairing, budget) after each stage's first
    # call, which has nothing to compare with; every one answered by a Delta.
    assert len(answered) >= 3 * 59
    assert all(answered)


@pytest.mark.parametrize("profile", ["chatcli", "chatcli-docs", "chatcli-aivax"])
def test_memos_agree_with_a_full_recompute_on_a_generated_session(profile) -> None:
    generator = pytest.importorskip("ctxsim.generator")
    session = generator.generate_session(40, seed=3)
    config = {"counter": "bytes4", "env": {"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "40000"}}
    fast = replay(session.messages, profile, config)
    slow = replay(session.messages, profile, config)
    slow.memos = None
    assert build_trace(fast) == build_trace(slow)


def test_the_call_view_marks_each_message_for_the_before_after_view() -> None:
    from ctxsim.replays.analysis import call_view

    msgs = [Message.of("user", "go", origin=0),
            Message.of("assistant", "", tool_calls=[ToolCall("a", "x", "{}"),
                                                    ToolCall("b", "x", "{}")], origin=1),
            Message.of("tool", "z" * 25000, tool_call_id="a", origin=2),
            Message.of("tool", "orphan", tool_call_id="q", origin=3)]
    rep = replay(msgs, "chatcli", {"counter": "bytes4"})
    call = list(rep.calls())[-1]
    rows = call_view(call, rep.cost).rows
    assert [row.status for row in rows] == [
        "unchanged", "unchanged", "spilled", "injected", "removed"
    ]
    assert [row.stage for row in rows] == ["", "", "budget", "pairing", "pairing"]


@settings(max_examples=300)
@given(st.binary(max_size=60), st.binary(max_size=60))
def test_the_call_view_diff_splits_both_contents_around_their_common_head_and_tail(old, new):
    from ctxsim.replays.analysis import content_diff

    d = content_diff(old, new)
    assert d.prefix + d.removed + d.suffix == old
    assert d.prefix + d.added + d.suffix == new
    # The head is as long as it can be; the tail takes what is left in common after it.
    assert not (d.removed and d.added and d.removed[0] == d.added[0])


def test_savings_per_stage_add_up_to_raw_minus_sent_with_the_dispatch_cap_on_its_own() -> None:
    from ctxsim.generator import generate_session
    from ctxsim.replays.analysis import call_summary

    session = generate_session(30, seed=4, oversize_every=3)
    calls = [call_summary(c) for c in replay(session.messages, "chatcli",
                                             {"counter": "bytes4"}).calls()]
    for c in calls:
        assert sum(c["saved"].values()) == c["raw"] - c["sent"]
    assert calls[-1]["saved"]["tool_cap"] > 0  # 25-90 KB results capped to ~6 KB at dispatch


@pytest.mark.parametrize("profile", ["chatcli", "chatcli-docs", "chatcli-aivax"])
def test_incremental_token_totals_equal_a_full_count_of_what_was_sent(profile) -> None:
    from ctxsim.generator import generate_session
    from ctxsim.pipeline.tokens import get_counter, history_tokens

    session = generate_session(40, seed=6, oversize_every=3)
    config = {"counter": "bytes4", "env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "4000",
                                           "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "30000"}}
    counter = get_counter("bytes4")
    for call in replay(session.messages, profile, config).calls():
        assert call.sent_tokens == history_tokens(call.sent, counter), call.call_index
        for run in call.stages:
            assert run.tokens_after == history_tokens(run.history, counter), (call.call_index,
                                                                               run.stage)
