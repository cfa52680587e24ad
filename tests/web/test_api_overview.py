"""`GET /api/v1/overview`: the team overview's filters and numbers as JSON (SPEC §12, §13)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.generator import generate_session
from ctxsim.overview.models import ColumnTask, Status
from ctxsim.overview.tasks import compute_column_job
from ctxsim.transcripts.store import save_sessions
from tests.factories import bearer

pytestmark = pytest.mark.django_db

URL = "/api/v1/overview"


def corpus(personas, n, user="owner"):
    sessions = [generate_session(6 + i, seed=i, oversize_every=3) for i in range(n)]
    return save_sessions(sessions, team=personas.team, user=personas.users[user])


def get(token, query=""):
    return Client().get(f"{URL}?{query}", **bearer(token))


def run_queued_figures():
    for pk in ColumnTask.objects.filter(status=Status.QUEUED).values_list("pk", flat=True):
        compute_column_job(pk)


def test_it_queues_then_answers_the_same_numbers_as_the_page(personas, api_tokens):
    corpus(personas, 3)
    query = "profiles=none&profiles=chatcli&model=gpt-5"
    first = get(api_tokens.read, query)
    assert first.status_code == 200
    body = first.json()
    assert body["sessions"] == 3 and body["complete"] is False
    assert body["progress"] == {"done": 0, "total": 6}
    assert DBTaskResult.objects.count() == 2  # one task per profile
    run_queued_figures()
    body = get(api_tokens.read, query).json()
    assert body["complete"] is True and body["cache"]["model"] == "gpt-5"
    page = personas.client("viewer").get(f"{reverse('team-overview')}?{query}")
    columns = page.context["overview"].columns
    assert [p["profile"] for p in body["profiles"]] == ["none", "chatcli"]
    for out, column in zip(body["profiles"], columns, strict=True):
        for field in ("sent_tokens", "cached_tokens", "failed", "loss_events", "calls",
                      "raw_tokens", "by_tool", "recorded_sessions"):
            assert out[field] == column.totals[field], field
        assert out["cost"] == pytest.approx(column.totals["cost"])
        assert out["done"] == 3 and out["pending"] == 0
    assert sum(body["peak_histogram"]["counts"][0]) == 3
    assert DBTaskResult.objects.count() == 2  # nothing queued twice


def test_the_filters_are_the_pages(personas, api_tokens):
    corpus(personas, 2)
    corpus(personas, 1, user="reviewer")
    body = get(api_tokens.read, "profiles=none&uploader=reviewer").json()
    assert body["sessions"] == 1 and body["filters"] == "uploader=reviewer"
    assert get(api_tokens.read, "profiles=none&since=2999-01-01").json()["sessions"] == 0


@pytest.mark.parametrize("query, message", [
    ("profiles=nope", "unknown profile"),
    ("model=gpt-0", "unknown model"),
    ("since=yesterday", "since"),
    ("profiles=none&profiles=chatcli&profiles=aivax&profiles=chatcli-docs&profiles=x",
     "at most 4 profiles"),
])
def test_bad_values_are_one_line_400s(personas, api_tokens, query, message):
    response = get(api_tokens.read, query)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not DBTaskResult.objects.exists()


@pytest.mark.parametrize("query, message", [
    ("profiles=saved:12345", "no saved profile"),
    ("uploader=nobody", "uploader: no member"),
])
def test_what_the_team_does_not_have_is_a_404(personas, api_tokens, query, message):
    """Well-formed (the schema allows them) but not there: 404, like a missing session."""
    response = get(api_tokens.read, query)
    assert response.status_code == 404
    assert message in response.json()["detail"]
    assert not DBTaskResult.objects.exists()


def test_an_ingest_token_cannot_read_it_and_beta_sees_its_own_team(personas, api_tokens):
    corpus(personas, 2)
    assert get(api_tokens.ingest).status_code == 403
    assert get(None).status_code == 401
    other = get(api_tokens.other, "profiles=none")
    assert other.status_code == 200 and other.json()["sessions"] == 0
