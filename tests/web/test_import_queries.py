"""Storing a session and computing its list figures take a number of queries that does not grow
with the session (issue 21, acceptance 4): no query per content, no batches by parameter limit."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ctxsim.generator import generate_session
from ctxsim.replays.services import compute_default_stats
from ctxsim.transcripts.models import Content, Message
from ctxsim.transcripts.search import search
from ctxsim.transcripts.store import load_session, save_sessions

# Both sizes are past Django's batch sizes on SQLite (999 parameters: ~90 message rows, 333
# contents per INSERT), so a batched write would show up as a difference.
SMALL, LARGE = 60, 240
MOST_QUERIES = 30


def _store_and_summarise(team, calls: int) -> tuple[int, int, object]:
    session = generate_session(calls, seed=calls)
    with CaptureQueriesContext(connection) as stored:
        row = save_sessions([session], team=team, source_name=f"{calls}.jsonl")[0]
    with CaptureQueriesContext(connection) as summarised:
        compute_default_stats(row)
    return len(stored), len(summarised), (row, session)


@pytest.mark.django_db
def test_storing_and_summarising_take_as_many_queries_at_four_times_the_size(personas):
    team = personas.team
    small_store, small_stats, (small_row, small) = _store_and_summarise(team, SMALL)
    large_store, large_stats, (large_row, large) = _store_and_summarise(team, LARGE)
    assert len(large.messages) > 3 * len(small.messages) > 500
    assert large_store == small_store
    assert large_stats == small_stats
    assert small_store + small_stats <= MOST_QUERIES


@pytest.mark.django_db
def test_what_is_stored_in_few_queries_reads_back_exactly(personas):
    team = personas.team
    _s, _t, (row, session) = _store_and_summarise(team, SMALL)
    back = load_session(row)
    assert [(m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error, m.meta)
            for m in back.messages] == [
        (m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error, dict(m.meta))
        for m in session.messages]
    # Every content got its count for the default counter, next to the counts it had.
    counts = Content.objects.filter(
        pk__in=Message.objects.filter(session=row).values("content_id")
    ).values_list("token_counts", flat=True)
    assert all("cl100k_base" in c for c in counts)
    # And everything is searchable: the last tool result's opening words find its message.
    last = next(m for m in reversed(session.messages) if m.role == "tool")
    line = next(line for line in last.text.split("\n") if len(line.split()) >= 3)
    words = " ".join(line.split()[:3])  # whole words: PostgreSQL matches phrases of words
    assert any(h.session_id == row.pk for h in search(team, words))


@pytest.mark.django_db
def test_a_second_counter_keeps_the_first_ones_counts(personas):
    from ctxsim.replays.services import summary_for
    from ctxsim.replays.state import ReplaySettings

    team = personas.team
    _s, _t, (row, _session) = _store_and_summarise(team, SMALL)
    summary_for(row, ReplaySettings().with_config({"counter": "o200k_base"}))
    counts = list(Content.objects.filter(
        pk__in=Message.objects.filter(session=row).values("content_id")
    ).values_list("token_counts", flat=True))
    assert all({"cl100k_base", "o200k_base"} <= set(c) for c in counts)
