"""Issue 27's API details: unknown filters and trace parameters are 400s, a page past the end
is a 404 with a message, and sessions carry their origin (filterable by project and host)."""

from __future__ import annotations

import pytest
from django.test import Client

from ctxsim.transcripts.models import Session
from tests.factories import bearer

pytestmark = pytest.mark.django_db


def get(url: str, token: str):
    return Client().get(url, **bearer(token))


def test_an_unknown_format_or_status_filter_is_a_400(api_tokens, stored):
    for query, name in (("format=nope", "format"), ("status=done", "status")):
        answer = get(f"/api/v1/sessions?{query}", api_tokens.read)
        assert answer.status_code == 400 and answer.json()["detail"].startswith(f"{name}:")
    assert get("/api/v1/sessions?format=swe-agent", api_tokens.read).json()["count"] == 0


def test_a_page_past_the_end_is_a_404_not_the_last_page(api_tokens, stored):
    assert get("/api/v1/sessions?page=1", api_tokens.read).status_code == 200
    answer = get("/api/v1/sessions?page=2", api_tokens.read)
    assert answer.status_code == 404 and "past the last page (1)" in answer.json()["detail"]
    assert get("/api/v1/sessions?page=0", api_tokens.read).status_code == 400


def test_an_unknown_trace_parameter_is_a_400(api_tokens, stored):
    url = f"/api/v1/sessions/{stored.pk}/trace"
    answer = get(f"{url}?budget_tokens=20000", api_tokens.read)
    assert answer.status_code == 400 and answer.json()["detail"].startswith("budget_tokens:")
    good = get(f"{url}?profile=chatcli&contextMaximumSize=20000&summary=1", api_tokens.read)
    assert good.status_code == 200


def test_origin_is_returned_and_filters_the_list(api_tokens, personas, stored):
    Session.objects.filter(pk=stored.pk).update(origin_host="laptop", origin_cwd="/src/app",
                                                origin_agent="codex", origin_agent_version="1")
    other = Session.objects.create(team=personas.team, title="other", format="codex",
                                   origin_host="ci", origin_cwd="/src/lib")
    detail = get(f"/api/v1/sessions/{stored.pk}", api_tokens.read).json()
    assert detail["origin"] == {"host": "laptop", "cwd": "/src/app", "agent": "codex",
                                "agent_version": "1"}
    ids = lambda query: [r["id"] for r in get(f"/api/v1/sessions?{query}",  # noqa: E731
                                              api_tokens.read).json()["results"]]
    assert ids("host=laptop") == [stored.pk] and ids("host=ci") == [other.pk]
    assert ids("project=app") == [stored.pk] and ids("project=/src/lib") == [other.pk]
    assert ids("project=src") == []
    page = personas.client("viewer").get("/?host=laptop")
    assert "/src/app" in page.content.decode() and "/src/lib" not in page.content.decode()


def test_the_session_page_and_the_overview_show_and_filter_by_origin(personas, stored):
    Session.objects.filter(pk=stored.pk).update(origin_host="laptop", origin_cwd="/src/app",
                                                origin_agent="claude-code")
    page = personas.client("viewer").get(f"/sessions/{stored.pk}/").content.decode()
    assert "laptop" in page and "/src/app" in page and "?project=/src/app" in page.replace(
        "%2F", "/")
    overview = personas.client("viewer").get("/overview/?project=elsewhere")
    assert overview.status_code == 200
    assert 'value="elsewhere"' in overview.content.decode()
