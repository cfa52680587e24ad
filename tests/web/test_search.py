"""Search inside contents (SPEC §13): one interface over SQLite FTS5 and PostgreSQL full-text."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.search import SearchError, index_sessions, matching_session_ids, search
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

NEEDLE = "ERR_TOKEN_BUCKET_4711"


def transcript(result: str, arguments: str = '{"cmd": "make"}', title: str = "build") -> Session:
    return Session(format="openai-chat", title=title, messages=(
        Message.of("system", "You are a build agent."),
        Message.of("user", "Why does the build fail?"),
        Message.of("assistant", "", tool_calls=[ToolCall("c1", "run", arguments)]),
        Message.of("tool", result, tool_call_id="c1"),
        Message.of("assistant", "", tool_calls=[ToolCall("c2", "run", '{"cmd": "ls"}')]),
        Message.of("tool", "Makefile\nREADME", tool_call_id="c2"),
        Message.of("assistant", "Done."),
    ))


@pytest.fixture
def stored(personas):
    log = "cc -c ok\n" * 50 + f"fatal: {NEEDLE} while linking\n" + "cc -c ok\n" * 50
    rows = save_sessions([transcript(log), transcript("all good", title="other")],
                         team=personas.team, user=personas.users["owner"])
    foreign = save_sessions([transcript(log, title="foreign")], team=personas.other_team)
    index_sessions(rows + foreign)
    return rows


def test_a_string_that_occurs_once_in_a_tool_result_finds_exactly_that_message(personas, stored):
    hits = search(personas.team, NEEDLE)
    assert [(h.session_id, h.message_index, h.role, h.where) for h in hits] == [
        (stored[0].pk, 3, "tool", "content")]
    hit = hits[0]
    (before, _), (match, marked), (after, _) = hit.snippet
    assert match == hit.match == NEEDLE and marked
    assert before.startswith("…") and before.endswith("fatal: ")
    assert after.startswith(" while linking") and after.endswith("…")
    assert hit.call_index == 1  # the call the first assistant message's result is sent at


def test_search_is_case_insensitive_and_finds_tool_call_arguments(personas, stored):
    assert [h.message_index for h in search(personas.team, NEEDLE.lower())] == [3]
    hits = search(personas.team, '"cmd": "ls"')
    assert {(h.message_index, h.where) for h in hits} == {(4, "tool-call arguments")}
    assert len({h.session_id for h in hits}) == 2


def test_another_teams_sessions_are_never_found(personas, stored):
    assert all(h.session_title != "foreign" for h in search(personas.team, NEEDLE))
    assert [h.session_title for h in search(personas.other_team, NEEDLE)] == ["foreign"]


def test_short_and_long_queries_are_refused_with_a_reason(personas, stored):
    with pytest.raises(SearchError, match="at least 3"):
        search(personas.team, "ab")
    with pytest.raises(SearchError, match="at most"):
        search(personas.team, "x" * 500)


def test_indexing_twice_adds_nothing_and_sessions_are_listed_once(personas, stored):
    index_sessions(stored)
    assert matching_session_ids(personas.team, NEEDLE) == [stored[0].pk]


def test_the_search_page_shows_the_snippet_and_links_to_the_call(personas, stored):
    response = personas.client("viewer").get(reverse("search"), {"q": NEEDLE})
    html = response.content.decode()
    assert response.status_code == 200
    assert f"<mark>{NEEDLE}</mark>" in html
    # The hit lands on its message in the call, with the words to highlight.
    assert f'href="/sessions/{stored[0].pk}/?call=1&amp;at=3&amp;hl={NEEDLE}"' in html
    short = personas.client("viewer").get(reverse("search"), {"q": "a"})
    assert short.status_code == 400 and "at least 3 characters" in short.content.decode()


def test_transcript_text_in_results_is_escaped(personas):
    rows = save_sessions([transcript("<script>alert('x')</script> ZZTOP_MARKER")],
                         team=personas.team)
    index_sessions(rows)
    html = personas.client("viewer").get(reverse("search"), {"q": "ZZTOP_MARKER"}).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_sessions_are_indexed_as_they_are_imported(personas):
    rows = save_sessions([transcript("stack: QUIXOTIC_FAILURE_99")], team=personas.team)
    assert [h.session_id for h in search(personas.team, "QUIXOTIC_FAILURE_99")] == [rows[0].pk]


def test_the_sessions_list_searches_file_names_and_with_the_toggle_contents(personas, stored):
    stored[1].source_name = "nightly-build-2026.jsonl"
    stored[1].save()
    viewer = personas.client("viewer")

    def listed(**query) -> str:
        return viewer.get(reverse("home"), query).content.decode()

    assert f"/sessions/{stored[1].pk}/" in listed(q="nightly-build")
    assert f"/sessions/{stored[0].pk}/" not in listed(q=NEEDLE)
    with_contents = listed(q=NEEDLE, contents="on")
    assert f"/sessions/{stored[0].pk}/" in with_contents
    assert f"/sessions/{stored[1].pk}/" not in with_contents
