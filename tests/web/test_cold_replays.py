"""First-time replays of stored sessions (issue 21): a threshold never asked in a process is
replayed with the counts other processes stored, tokenizing nothing they already counted."""

from __future__ import annotations

import hashlib

import pytest
from django.core.cache import cache
from django.http import QueryDict

from ctxsim.pipeline import token_cuts, tokens
from ctxsim.replays import services
from ctxsim.replays.cache import REPLAYS
from ctxsim.replays.models import DerivedTokenCount, ReplayRun
from ctxsim.replays.state import settings_from_query

pytestmark = pytest.mark.django_db


class Refuse:
    def encode_ordinary(self, text):
        raise AssertionError(f"tokenized again: {text[:60]!r}")


def threshold(personas, value: int):
    query = f"profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS={value}"
    return settings_from_query(QueryDict(query), personas.team)[0]


def test_a_new_threshold_in_a_cold_process_reuses_the_stored_preview_counts(
    personas, long_session, monkeypatch
):
    asked, never = threshold(personas, 3001), threshold(personas, 3002)
    with REPLAYS.another_process():
        # One process replays a threshold: it tokenizes the contents and the previews it
        # makes, and stores their counts.
        first = services.summary_for(long_session, asked)
        assert first.totals["spills"] > 0
        assert DerivedTokenCount.objects.filter(session=long_session).exists()

    # A cold process (nothing loaded, an empty counter) asked for a threshold nobody asked
    # before: a replay (no stored run), which spills the same results into the same previews.
    assert not ReplayRun.objects.filter(session=long_session, key=never.key).exists()
    with REPLAYS.another_process():
        cache.clear()
        counter = tokens.get_counter("cl100k_base")
        monkeypatch.setattr(counter, "_encoding", Refuse())
        with counter.recording() as fresh:
            run = services.summary_for(long_session, never)
        assert fresh == {}
        assert ReplayRun.objects.filter(session=long_session, key=never.key).exists()
        assert run.totals["spills"] == first.totals["spills"]
        assert run.totals["total_sent"] == first.totals["total_sent"]


@pytest.mark.parametrize("bound", [1000, 10])
def test_the_first_replay_stores_the_pieces_of_long_results_of_sessions_web_processes_replay(
    personas, long_session, settings, bound
):
    """Issue 31: with the counts of what it tokenized, the replay of a session that replays
    inline (within CTXSIM_INLINE_REPLAY_CALLS) stores the head pieces of its long results, so
    a web process counts their previews without tokenizing them again; past the bound (the
    worker replays it, and keeps its own pieces) it does not."""
    settings.CTXSIM_INLINE_REPLAY_CALLS = bound
    long_results = [m.content for m in services.canonical_session(long_session).messages
                    if m.role == "tool" and len(m.content) > 2 * token_cuts.HEAD_REGION]
    assert long_results
    with REPLAYS.another_process():
        services.summary_for(long_session, threshold(personas, 9001))
    stored = set(DerivedTokenCount.objects.filter(session=long_session)
                 .values_list("digest", flat=True))
    heads = {hashlib.sha256(c[:token_cuts.piece_cuts(c)[0][0]]).hexdigest()
             for c in long_results}
    if long_session.model_call_count <= bound:
        assert heads <= stored
    else:
        assert not heads & stored
