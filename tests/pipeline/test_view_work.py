"""Issue 31: reading one call of a replay never counts what the replay already measured.

Counted, not timed: the contents a counter tokenizes while the call view is built."""

from __future__ import annotations

from ctxsim.generator import generate_session
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.tokens import get_counter, isolated_counters
from ctxsim.replays.analysis import call_view


def test_the_call_view_tokenizes_nothing_even_after_the_count_cache_forgot_everything():
    session = generate_session(60, seed=3)
    with isolated_counters():
        rep = replay(session.messages, "chatcli", {"counter": "cl100k_base"})
        calls = list(rep.calls())
        counter = get_counter("cl100k_base")
        counter._cache.clear()  # as a cache past its bound forgets (the oldest first)
        counter._by_digest.clear()
        tokenized: list[bytes] = []
        real = counter._tokenize
        counter._tokenize = lambda c: tokenized.append(c) or real(c)
        views = [call_view(call, rep.cost) for call in calls[-5:]]
    assert tokenized == []
    last = calls[-1]
    # The rows carry the replay's own figures: what was sent adds up to the call's estimate.
    sent = sum(row.tokens for row in views[-1].rows if row.sent_position is not None)
    assert sent == last.sent_tokens - rep.extra_tokens
