"""Issue 31: reading one call of a replay never counts what the replay already measured.

Counted, not timed: the contents a counter tokenizes while the call view is built."""

from __future__ import annotations

import operator

import pytest

from ctxsim.generator import generate_session
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.tokens import get_counter, isolated_counters
from ctxsim.replays.analysis import STATUSES, call_view
from ctxsim.replays.view_memo import ViewMemo


def test_the_call_view_tokenizes_nothing_even_after_the_count_cache_forgot_everything():
    session = generate_session(60, seed=3)
    with isolated_counters():
        rep = replay(session.messages, "chatcli", {"counter": "cl100k_base"})
        calls = list(rep.calls())
        counter = get_counter("cl100k_base")
        counter._cache.clear()  # as a cache past its bound forgets (the oldest first)
        counter._by_digest.clear()
        tokenized: list[bytes] = []
        real, real_all = counter._tokenize, counter._tokenize_all
        counter._tokenize = lambda c: tokenized.append(c) or real(c)
        counter._tokenize_all = lambda cs, learned=None: tokenized.extend(cs) or real_all(
            cs, learned)
        views = [call_view(call, rep.cost) for call in calls[-5:]]
    assert tokenized == []
    last = calls[-1]
    # The rows carry the replay's own figures: what was sent adds up to the call's estimate.
    sent = sum(row.tokens for row in views[-1].rows if row.sent_position is not None)
    assert sent == last.sent_tokens - rep.extra_tokens


# Profiles that rewrite, spill, remove and inject messages (on a generated session).
PROFILES = ["chatcli", "claude-code", "anthropic-context-management", "opencode", "aider"]


def _columns(view) -> tuple:
    """Every per-row column of a call view, and its counts."""
    return (view.statuses, view.carried, view.origins, view.roles, view.weights,
            view.tool_names(), view.counts)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_row_of_the_call_view_reads_as_its_raw_sent_and_started_messages_say(profile):
    session = generate_session(40, seed=7)
    rep = replay(session.messages, profile, {"counter": "bytes4"})
    memo = ViewMemo()  # what a paused replay's views remember from call to call
    for call in rep.calls():
        view = call_view(call, rep.cost, costs=rep.costs)
        # Brought up from the last call's view, as a paused replay's next step is.
        remembered = call_view(call, rep.cost, costs=rep.costs, memo=memo)
        memo.last = (call, remembered)
        assert _columns(remembered) == _columns(view)
        assert all(map(operator.is_, remembered.messages, view.messages))
        assert [r.stage for r in remembered.rows] == [r.stage for r in view.rows]
        raw = {m.origin: m for m in reversed(call.raw_history)}
        started = {m.origin: m for m in reversed(call.input_history) if m.origin is not None}
        sent = list(call.sent)
        spilled = [s.path.encode() for s in call.spills]
        # Every raw message once; the sent ones in order, each removed one before the first
        # sent message of a later origin.
        assert sorted(o for o in view.origins if o in raw) == sorted(raw)
        assert [m for m in view.messages if m.origin not in raw or m.origin in
                {s.origin for s in sent}] == sent
        for i, status in enumerate(view.statuses):
            row = view.rows[i]
            m, before = view.messages[i], raw.get(view.origins[i])
            assert (row.status, row.carried, row.origin) == (status, view.carried[i],
                                                           view.origins[i])
            assert view.weights[i] == (row.tokens or row.raw_tokens)
            if status == "removed":
                assert view.origins[i] not in {s.origin for s in sent}
                assert row.carried == (view.origins[i] not in started)
            elif before is None:
                assert status == "injected"
            elif before.content == m.content and before.tool_calls == m.tool_calls:
                assert status == "unchanged" and not row.carried
            else:
                assert status == ("spilled" if any(p in m.content for p in spilled)
                                  else "rewritten")
                kept = started.get(m.origin)
                assert row.carried == (kept is not None and kept.content == m.content
                                       and kept.tool_calls == m.tool_calls)
                assert (row.diff is None) == row.carried
        assert view.counts == {s: view.statuses.count(s) for s in STATUSES}


@pytest.mark.parametrize("profile", ["chatcli", "claude-code", "opencode"])
def test_a_view_brought_up_from_any_other_call_of_its_replay_is_the_fresh_view(profile):
    """A finished replay keeps its calls and their views are asked for in any order (a
    summary replay's kept calls): brought up from a later call's view, or a far one, a view
    is what a memo that saw nothing makes."""
    session = generate_session(40, seed=11)
    rep = replay(session.messages, profile, {"counter": "bytes4"})
    calls = list(rep.calls())
    memo = ViewMemo()
    for call in [*calls[::-1], *calls[::7], calls[3], calls[-1]]:
        remembered = call_view(call, rep.cost, costs=rep.costs, memo=memo)
        memo.last = (call, remembered)
        fresh = call_view(call, rep.cost, costs=rep.costs)
        assert _columns(remembered) == _columns(fresh)


def test_a_call_view_makes_a_row_only_when_it_is_read():
    """Issue 31: a step to a call of ~28,000 rows renders a few dozen of them."""
    session = generate_session(60, seed=3)
    rep = replay(session.messages, "chatcli", {"counter": "bytes4"})
    last = list(rep.calls())[-1]
    view = call_view(last, rep.cost, costs=rep.costs)
    assert len(view.rows) == len(last.sent) > 100
    assert view.rows_made == 0
    assert view.rows[5] is view.rows[5] and view.rows[-1].origin == view.origins[-1]
    assert view.rows_made == 2
