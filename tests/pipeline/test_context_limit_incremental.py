"""Issue 31: `context_limit` keeps its truncation cut across calls and moves it by what changed.
At every call of a replay its report and output must be what SPEC §2.3's loop, run afresh on
that call's input, gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.tokens import get_counter, message_tokens

IDS = st.sampled_from(["a", "b", "c", "d"])
# Now and then a large content: a large result turned into a placeholder once it is older
# shrinks the excess, and the cut must move back.
TEXT = st.one_of(st.text(alphabet="xyz \n", max_size=120),
                 st.integers(min_value=200, max_value=2400).map(lambda n: "x" * n))


@st.composite
def message(draw) -> Message:
    role = draw(st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool",
                                 "tool", "tool"]))
    text = draw(TEXT)
    if role == "assistant":
        calls = [ToolCall(i, "read", "{}") for i in draw(st.lists(IDS, max_size=3))]
        return Message.of("assistant", text, tool_calls=calls)
    if role == "tool":
        return Message.of("tool", text, tool_call_id=draw(IDS))
    return Message.of(role, text)


def truncated_afresh(history, limit: int) -> list[int]:
    """SPEC §2.3's Truncate, as written: while the conversation is over the limit, remove the
    earliest message neither system-role nor the last user message, an assistant message with
    every result whose nearest earlier call with its id it holds."""
    counter = get_counter("bytes4")
    costs = [message_tokens(m, counter) for m in history]
    total = sum(costs)
    owner: dict[int, int | None] = {}
    for j, m in enumerate(history):
        if m.role == "tool":
            owner[j] = next((i for i in range(j - 1, -1, -1) if history[i].role == "assistant"
                             and any(c.id == m.tool_call_id for c in history[i].tool_calls)),
                            None)
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=None)
    removed: set[int] = set()
    while total > limit:
        first = next((i for i, m in enumerate(history) if i not in removed
                      and m.role != "system" and i != last_user), None)
        if first is None:
            break
        unit = [first, *(j for j, o in owner.items() if o == first)]
        for j in unit:
            if j not in removed:
                removed.add(j)
                total -= costs[j]
    return sorted(removed)


@settings(max_examples=300, deadline=None)
@given(st.lists(message(), min_size=1, max_size=40), st.integers(min_value=0, max_value=900),
       st.sampled_from(["Truncate", "TruncateHard"]), st.integers(min_value=0, max_value=3),
       st.sampled_from(["aivax", "chatcli-aivax"]))
def test_each_call_truncates_as_the_loop_run_afresh_would(history, limit, action, keep,
                                                            profile) -> None:
    # `chatcli-aivax` rewrites the client's history in place between calls (microcompact,
    # pairing), `toolContextCount` the older results: the cut must follow both.
    config = {"counter": "bytes4", "contextMaximumSize": limit,
              "contextOverflowAction": action, "toolContextCount": keep}
    for call in replay(history, profile, config).calls():
        at = next(k for k, s in enumerate(call.stages) if s.stage == "context_limit")
        given_history = call.stages[at - 1].history
        report = call.stages[at].report
        removed = truncated_afresh(given_history, limit)
        tokens = sum(message_tokens(m, get_counter("bytes4")) for m in given_history)
        after = tokens - sum(message_tokens(given_history[i], get_counter("bytes4"))
                             for i in removed)
        assert report["tokens_before"] == tokens
        assert report["removed_indices"] == removed and report["removed"] == len(removed)
        assert report["tokens_after"] == after
        assert report["error"] == ("context_overflow" if action == "TruncateHard"
                                   and after > limit else None)
        assert tuple(call.stages[at].history) == tuple(
            m for i, m in enumerate(given_history) if i not in set(removed))


@settings(max_examples=60, deadline=None)
@given(st.lists(message(), min_size=1, max_size=40), st.integers(min_value=0, max_value=900))
def test_the_cut_kept_across_calls_gives_what_a_fresh_one_gives(history, limit) -> None:
    config = {"counter": "bytes4", "contextMaximumSize": limit, "toolContextCount": 1}
    fast = replay(history, "aivax", config)
    slow = replay(history, "aivax", config)
    slow.memos = None
    for a, b in zip(fast.calls(), slow.calls(), strict=True):
        assert [s.report for s in a.stages] == [s.report for s in b.stages]
        assert tuple(a.sent) == tuple(b.sent) and a.sent_tokens == b.sent_tokens


def test_the_cut_moves_back_when_a_large_result_becomes_a_placeholder() -> None:
    history = [Message.of("system", "s"), Message.of("user", "q1"),
               Message.of("assistant", "x" * 40), Message.of("user", "q2"),
               Message.of("assistant", "y" * 40), Message.of("user", "q3"),
               Message.of("assistant", "", tool_calls=[ToolCall("a", "read", "{}")]),
               Message.of("tool", "z" * 2000, tool_call_id="a"),
               Message.of("assistant", "", tool_calls=[ToolCall("b", "read", "{}")]),
               Message.of("tool", "w", tool_call_id="b"), Message.of("assistant", "done")]
    config = {"counter": "bytes4", "contextMaximumSize": 60, "toolContextCount": 1}
    calls = list(replay(history, "aivax", config).calls())
    removed = [c.stages[1].report["removed_indices"] for c in calls]
    # The large result forces out everything but the system and last user messages; once it
    # is a placeholder, the first two messages are enough.
    assert removed[-2:] == [[1, 2, 3, 4, 6, 7], [1, 2]]
    assert removed == [truncated_afresh(c.stages[0].history, 60) for c in calls]
