"""The sessions list at `/`: team-scoped, filters and search by GET, htmx table partial."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ctxsim.transcripts.models import ReviewStatus, Session

pytestmark = pytest.mark.django_db



def make_session(team, title, *, format="claude-code", parent=None, **fields) -> Session:
    defaults = {"model_call_count": 3, "tool_call_count": 2, "tool_result_count": 2}
    return Session.objects.create(
        team=team, title=title, format=format, parent=parent, **{**defaults, **fields}
    )


@pytest.fixture
def sessions(personas):
    alpha, beta = personas.team, personas.other_team
    parent = make_session(alpha, "Refactor the budget stage", uploaded_by=personas.users["owner"])
    make_session(alpha, "Explore subagent", parent=parent)
    make_session(
        alpha, "Fix flaky pairing test", format="codex", review_status=ReviewStatus.APPROVED,
        peak_raw_tokens=120000, peak_sent_tokens=45000, replay_errors=2,
    )
    make_session(beta, "Beta team secret plan")
    return parent


def titles(response) -> str:
    return response.content.decode()


def test_the_home_page_lists_the_current_teams_sessions(personas, sessions):
    response = personas.client("viewer").get(reverse("home"))
    assert response.status_code == 200
    html = titles(response)
    assert "Refactor the budget stage" in html
    assert "Fix flaky pairing test" in html
    assert reverse("session-detail", args=[sessions.pk]) in html
    assert "120,000 → 45,000" in html


def test_an_outsider_sees_nothing_of_another_teams_sessions(personas, sessions):
    html = titles(personas.client("outsider").get(reverse("home")))
    assert "Beta team secret plan" in html
    assert "Refactor the budget stage" not in html
    assert "Explore subagent" not in html


def test_members_do_not_see_other_teams_sessions(personas, sessions):
    assert "Beta team secret plan" not in titles(personas.client("owner").get(reverse("home")))


def test_a_sidechain_is_listed_right_under_its_parent(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home")))
    parent_at = html.index("Refactor the budget stage")
    child_at = html.index("Explore subagent")
    other_at = html.index("Fix flaky pairing test")
    # Newest first: the codex session is newest, then the parent with its sidechain.
    assert other_at < parent_at < child_at
    assert 'class="session-row sidechain"' in html


def test_sessions_without_replay_stats_show_a_dash(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home")))
    row = html[html.index(f'id="session-{sessions.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "—" in row


def test_the_format_filter_keeps_only_that_format(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home"), {"format": "codex"}))
    assert "Fix flaky pairing test" in html
    assert "Refactor the budget stage" not in html


def test_the_review_status_filter_keeps_only_that_status(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home"), {"status": "approved"}))
    assert "Fix flaky pairing test" in html
    assert "Refactor the budget stage" not in html


def test_search_matches_titles_case_insensitively(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home"), {"q": "BUDGET"}))
    assert "Refactor the budget stage" in html
    assert "Fix flaky pairing test" not in html


def test_search_for_a_sidechain_title_shows_it_with_its_parent(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home"), {"q": "subagent"}))
    assert "Refactor the budget stage" in html
    assert "Explore subagent" in html
    assert "Fix flaky pairing test" not in html


def test_unknown_filter_values_are_ignored_not_an_error(personas, sessions):
    response = personas.client("owner").get(reverse("home"), {"format": "<x>", "status": "nope"})
    assert response.status_code == 200
    assert "Refactor the budget stage" in titles(response)


def test_a_search_that_matches_nothing_says_so(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home"), {"q": "no such thing"}))
    assert "No session matches these filters." in html


def test_an_htmx_request_gets_only_the_table_partial(personas, sessions):
    response = personas.client("owner").get(
        reverse("home"), {"format": "codex"}, headers={"HX-Request": "true"}
    )
    html = titles(response)
    assert html.lstrip().startswith('<div id="session-table">')
    assert "<html" not in html
    assert "Fix flaky pairing test" in html
    assert "Refactor the budget stage" not in html


def test_the_full_page_holds_the_filter_form_and_the_table(personas, sessions):
    html = titles(personas.client("owner").get(reverse("home")))
    assert "<html" in html
    assert 'id="session-table"' in html
    assert 'method="get"' in html


def test_titles_are_escaped(personas):
    make_session(personas.team, "<script>alert(1)</script>")
    html = titles(personas.client("owner").get(reverse("home")))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_list_is_paginated(personas):
    for n in range(55):
        make_session(personas.team, f"Generated {n:02d}")
    first = titles(personas.client("owner").get(reverse("home")))
    assert "Generated 54" in first and "Generated 00" not in first
    second = titles(personas.client("owner").get(reverse("home"), {"page": 2}))
    assert "Generated 00" in second


def test_anonymous_users_are_sent_to_log_in(personas):
    response = personas.client("anonymous").get(reverse("home"))
    assert response.status_code == 302


def test_the_teams_table_lives_at_its_own_page(personas):
    response = personas.client("owner").get(reverse("team-list"))
    assert response.status_code == 200
    assert "Your teams" in response.content.decode()
    assert 'id="team-alpha"' in response.content.decode()
