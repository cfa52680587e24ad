"""Search inside contents, issues 26 and 28: every word in any order, quoted phrases, control
characters refused, the team filter inside the ranked query, uploads told apart."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts import search as search_module
from ctxsim.transcripts.search import SearchError, index_sessions, search
from ctxsim.transcripts.store import save_sessions
from tests.factories import bearer

pytestmark = pytest.mark.django_db

ADJACENT = "TimeDelta serialization fails for large values"
APART = "the serialization of a TimeDelta rounds to microseconds"


def transcript(*results: str, title: str = "marshmallow", arguments: str = "{}") -> Session:
    messages = [Message.of("system", "You fix bugs."), Message.of("user", "Fix the field.")]
    for n, result in enumerate(results):
        messages += [Message.of("assistant", "", tool_calls=[ToolCall(f"c{n}", "run", arguments)]),
                     Message.of("tool", result, tool_call_id=f"c{n}")]
    return Session(format="openai-chat", title=title,
                   messages=(*messages, Message.of("assistant", "Done.")))


@pytest.fixture
def marshmallow(personas):
    rows = save_sessions([transcript(ADJACENT, APART)], team=personas.team)
    index_sessions(rows)
    return rows[0]


def found(team, query: str) -> list[int]:
    return [h.message_index for h in search(team, query)]


def test_every_word_matches_in_any_order(personas, marshmallow):
    assert found(personas.team, "TimeDelta serialization") == [3, 5]
    assert found(personas.team, "serialization TimeDelta") == [3, 5]
    assert found(personas.team, "SERIALIZATION timedelta microseconds") == [5]
    assert found(personas.team, "serialization TimeDelta nanoseconds") == []


def test_a_quoted_phrase_is_matched_as_a_phrase(personas, marshmallow):
    assert found(personas.team, '"TimeDelta serialization"') == [3]
    assert found(personas.team, '"serialization TimeDelta"') == []
    assert found(personas.team, '"large values" timedelta') == [3]
    assert found(personas.team, '"of a TimeDelta') == [5]  # an unclosed quote runs to the end


def test_short_words_are_checked_beside_a_longer_one(personas, marshmallow):
    assert found(personas.team, "of TimeDelta") == [5]
    with pytest.raises(SearchError, match="at least 3"):
        search(personas.team, "of a")


def test_the_snippet_marks_every_word_and_the_page_lands_on_the_message(personas, marshmallow):
    html = personas.client("viewer").get(reverse("search"),
                                         {"q": "serialization TimeDelta"}).content.decode()
    assert "2 messages found" in html
    assert "<mark>TimeDelta</mark> <mark>serialization</mark> fails" in html
    assert "the <mark>serialization</mark> of a <mark>TimeDelta</mark> rounds" in html
    assert (f'href="/sessions/{marshmallow.pk}/?call=2&amp;at=5'
            '&amp;hl=serialization%20TimeDelta"') in html


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x9b"])
def test_control_characters_are_refused_with_a_message_on_the_page(personas, marshmallow, char):
    response = personas.client("viewer").get(reverse("search"), {"q": f"Time{char}Delta"})
    html = response.content.decode()
    assert response.status_code == 400
    assert f"control character (U+{ord(char):04X}) at character 5" in html
    assert char not in html  # the form shows the query again, without it
    with pytest.raises(SearchError, match="control character"):
        search(personas.team, f"serialization{char}")


def test_tabs_and_newlines_only_separate_words(personas, marshmallow):
    assert found(personas.team, "serialization\tTimeDelta\r\n") == [3, 5]


def test_control_characters_in_the_sessions_lists_contents_search_are_no_error(personas,
                                                                              marshmallow):
    viewer = personas.client("viewer")
    for query, error in (("Time\x00Delta", "Null characters are not allowed"),
                         ("Time\x01Delta", "The search holds a control character (U+0001)")):
        response = viewer.get(reverse("home"), {"q": query, "contents": "on"})
        assert response.status_code == 200
        assert f'<p class="error" role="alert">Not searched: {error}' in response.content.decode()
    short = viewer.get(reverse("home"), {"q": "of a", "contents": "on"}).content.decode()
    assert f"/sessions/{marshmallow.pk}/" not in short
    listed = viewer.get(reverse("home"), {"q": "TimeDelta", "contents": "on"}).content.decode()
    assert f"/sessions/{marshmallow.pk}/" in listed


def test_the_api_refuses_a_nul_in_its_query(personas, marshmallow):
    out = StringIO()
    call_command("create_api_token", "--team", "alpha", "--name", "ci", "--scope", "read",
                 stdout=out, stderr=StringIO())
    response = Client().get("/api/v1/sessions", {"q": "a\x00b"}, **bearer(out.getvalue().strip()))
    assert response.status_code == 400 and "NUL" in response.json()["detail"]


@pytest.mark.parametrize("where", ["content", "tool-call arguments"])
def test_another_teams_matches_never_crowd_out_the_teams_own(personas, monkeypatch, where):
    """Issue 28: the index's candidates were cut before the team filter, so a team whose
    matches came later in the index found nothing of its own."""
    monkeypatch.setattr(search_module, "CANDIDATES", 3)

    def holding(n: int, title: str) -> Session:
        text = f"ZEBRA_CROSSING_{n} failed"
        if where == "content":
            return transcript(text, title=title)
        return transcript("ok", title=title, arguments=f'{{"cmd": "{text}"}}')

    foreign = save_sessions([holding(n, "foreign") for n in range(6)], team=personas.other_team)
    own = save_sessions([holding(99, "own")], team=personas.team)
    index_sessions(foreign + own)
    hits = search(personas.team, "zebra_crossing")
    assert [(h.session_id, h.where) for h in hits] == [(own[0].pk, where)]
    assert len(search(personas.other_team, "zebra_crossing")) == 3  # its own, up to 3
    listed = search_module.matching_session_ids(personas.team, "ZEBRA_CROSSING")
    assert listed == [own[0].pk]


def test_two_uploads_of_one_session_are_told_apart(personas):
    first = save_sessions([transcript(ADJACENT)], team=personas.team,
                          user=personas.users["owner"], source_name="monday.jsonl")
    second = save_sessions([transcript(ADJACENT)], team=personas.team,
                           user=personas.users["reviewer"], source_name="tuesday.jsonl")
    index_sessions(first + second)
    hits = search(personas.team, "TimeDelta")
    assert [(h.session_id, h.uploaded_by, h.source_name) for h in hits] == [
        (second[0].pk, "reviewer", "tuesday.jsonl"), (first[0].pk, "owner", "monday.jsonl")]
    assert hits[0].uploaded_at == second[0].created_at
    html = personas.client("viewer").get(reverse("search"), {"q": "TimeDelta"}).content.decode()
    stamp = second[0].created_at.strftime("%Y-%m-%d %H:%M")
    assert (f"uploaded <time datetime=\"{second[0].created_at.isoformat()}\">{stamp}</time> by "
            f'reviewer · <span class="file">tuesday.jsonl</span> · session {second[0].pk}') in html
    assert '<span class="file">monday.jsonl</span>' in html and "by owner" in html


def test_how_a_query_reads():
    """`terms.parse` (pure): words, phrases, overlapping occurrences, case without shifts."""
    from ctxsim.transcripts.terms import parse

    assert parse('TimeDelta "large  values" TimeDelta').texts == ["TimeDelta", "large values"]
    assert parse('"cmd": "ls"').texts == ["cmd", ":", "ls"]
    assert parse("a b", indexed=False).texts == ["a", "b"]
    # Overlapping terms mark one run; "İ" lower-cases to two characters, the marks stay put.
    assert parse("time timedelta").snippet("a TimeDelta.") == (
        ("a ", False), ("TimeDelta", True), (".", False))
    assert parse("istanbul").snippet("İİ Istanbul") == (("İİ ", False), ("Istanbul", True))
    text = "x" * 200 + " needle " + "y" * 200
    pieces = parse("needle").snippet(text)
    assert pieces[0][0].startswith("…") and pieces[-1][0].endswith("…")
    assert parse("needle").snippet("no such word") is None
    assert parse("TimeDelta serialization").matches("SERIALIZATION of a\\ntimedelta")
