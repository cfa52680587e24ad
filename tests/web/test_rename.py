"""Owners rename a session (issue 19): a small form on the session page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import save_sessions
from tests.factories import spilling_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(personas):
    return save_sessions([spilling_session()], team=personas.team,
                         user=personas.users["owner"])[0]


def rename(personas, persona: str, session, title: str, **extra):
    return personas.client(persona).post(reverse("session-rename", args=[session.pk]),
                                         {"title": title, **extra})


def test_an_owner_renames_a_session_and_lands_back_on_the_same_view(personas, stored):
    response = rename(personas, "owner", stored, "  Linker failure on CI  ",
                      state="profile=aivax&call=1")
    assert response.status_code == 302
    assert response["Location"] == (reverse("session-detail", args=[stored.pk])
                                    + "?profile=aivax&call=1")
    stored.refresh_from_db()
    assert stored.title == "Linker failure on CI"
    page = personas.client("viewer").get(reverse("session-detail", args=[stored.pk]))
    assert "<h1>Linker failure on CI</h1>" in page.content.decode()


def test_an_empty_or_overlong_title_is_refused_with_a_message(personas, stored):
    before = stored.title
    client = personas.client("owner")
    for title in ("   ", "x" * 301):
        response = client.post(reverse("session-rename", args=[stored.pk]), {"title": title})
        assert response.status_code == 302
        page = client.get(response["Location"]).content.decode()
        assert "Not renamed" in page
    assert Session.objects.get(pk=stored.pk).title == before


def test_only_owners_see_the_form_and_may_rename(personas, stored):
    url = reverse("session-detail", args=[stored.pk])
    assert 'id="rename-session"' in personas.client("owner").get(url).content.decode()
    for persona in ("reviewer", "viewer"):
        assert 'id="rename-session"' not in personas.client(persona).get(url).content.decode()
        assert rename(personas, persona, stored, "mine now").status_code == 403
    assert rename(personas, "outsider", stored, "mine now").status_code == 404
    assert Session.objects.get(pk=stored.pk).title == "Build failure"


def test_the_state_to_return_to_cannot_send_the_user_elsewhere(personas, stored):
    response = rename(personas, "owner", stored, "New",
                      state="//evil.example/?x=1\r\nSet-Cookie: a")
    location = response["Location"]
    assert location.startswith(reverse("session-detail", args=[stored.pk]) + "?")
    assert "\n" not in location and "evil.example/" not in location.split("?")[0]
