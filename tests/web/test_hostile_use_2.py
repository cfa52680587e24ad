"""Issue 28 ("Holds under hostile use, round 2"): the findings of this branch that need no
worker — login lockout and profile imports."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ctxsim.replays.models import SavedProfile
from ctxsim.transcripts.store import save_sessions
from tests.factories import spilling_session

pytestmark = pytest.mark.django_db

HUGE = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


@pytest.fixture
def stored(personas):
    return save_sessions([spilling_session()], team=personas.team,
                         user=personas.users["owner"])[0]


@pytest.mark.parametrize(("tool", "text", "field"), [
    ("codex", f"model_context_window = {HUGE}\n", "config.toml model_context_window"),
    ("openhands", f"[llm]\nmax_message_chars = {HUGE}\n", "config.toml [llm] max_message_chars"),
])
def test_a_toml_profile_with_a_huge_integer_is_a_400_naming_the_field(personas, stored, tool,
                                                                     text, field):
    """Issue 28 item 11: tomllib's ValueError past 4,300 digits escaped as a 500."""
    response = personas.client("reviewer").post(
        reverse("profile-import", args=[stored.pk]),
        {"format": tool, "name": "huge", "text": text})
    assert response.status_code == 400
    body = response.content.decode()
    assert field in body and "the integer is too long" in body
    assert not SavedProfile.objects.filter(name="huge").exists()
