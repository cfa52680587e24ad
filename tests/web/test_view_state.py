"""The session page's state: empty optional fields are "not set", one serializer feeds every
link and form, and exports list only what the format cannot carry (issue 19)."""

from __future__ import annotations

import pytest
from django.http import QueryDict
from django.urls import reverse

from ctxsim.generator import generate_session
from ctxsim.replays.models import SavedProfile
from ctxsim.replays.state import settings_from_query
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_session(personas):
    session = generate_session(24, seed=5, oversize_every=4)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def test_an_empty_optional_text_field_is_not_set(personas):
    settings, errors = settings_from_query(
        QueryDict("profile=chatcli&anchor_text=&env.present=1"), personas.team)
    assert errors == {}
    assert "anchor_text" not in settings.config
    assert settings.run_config().values["anchor_text"] is None
    typed, _ = settings_from_query(QueryDict("profile=chatcli&anchor_text=remember"),
                                   personas.team)
    assert typed.config["anchor_text"] == "remember"


def test_saving_the_form_as_submitted_stores_no_empty_anchor(personas, long_session):
    client = personas.client("reviewer")
    client.post(reverse("profile-save", args=[long_session.pk]), {
        "profile": "chatcli", "anchor_text": "", "env.present": "1",
        "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "8000", "name": "tight",
    })
    saved = SavedProfile.objects.get(team=personas.team, name="tight")
    assert "anchor_text" not in saved.params


def test_a_profile_saved_with_an_empty_anchor_injects_nothing(personas):
    saved = SavedProfile.objects.create(
        team=personas.team, name="old", base="chatcli",
        stages=[["tool_cap", "dispatch"], ["microcompact", "persistent"],
                ["pairing", "persistent"], ["budget", "outgoing"]],
        params={"anchor_text": ""})
    settings, errors = settings_from_query({"profile": saved.ref}, personas.team)
    assert errors == {}
    assert settings.run_config().values["anchor_text"] is None
