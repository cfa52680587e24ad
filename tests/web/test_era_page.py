"""The session page names the era of the release that wrote the transcript (SPEC-agents
§2.5.0.11), shows the era's values in the thresholds form, and lets every one be overridden."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from ctxsim.replays import services
from ctxsim.transcripts.imports import finish_import, import_transcript

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).parent.parent / "importers" / "fixtures" / "claude-code-small.jsonl"


def _session(personas, tmp_path, version: str):
    path = tmp_path / "session.jsonl"
    path.write_text(FIXTURE.read_text().replace('"version": "2.1.20"',
                                                f'"version": "{version}"'))
    outcome = import_transcript(path, team=personas.team, user=personas.users["owner"])
    finish_import(outcome.sessions)
    return outcome.sessions[0]


def _selected(html: str, name: str) -> str:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select, name
    return re.search(r"<option selected>([^<]+)</option>", select.group(1)).group(1)


def test_the_page_names_the_era_and_its_values(personas, tmp_path):
    row = _session(personas, tmp_path, "1.0.17")
    html = personas.client("viewer").get(reverse("session-detail", args=[row.pk])).content.decode()
    note = re.search(r'<p class="help" id="era-note">([^<]+)</p>', html)
    assert note, "the page names no era"
    assert note.group(1).startswith("Claude Code 1.0.17: ")
    assert "Bash output middle-truncated at 30,000 characters" in note.group(1)
    assert _selected(html, "cc_bash_mode") == "middle"
    assert _selected(html, "cc_mcp_mode") == "error"
    assert "From the release: Claude Code 1.0.17" in html
    assert services.default_settings(row).era.version == "1.0.17"


def test_an_era_value_can_be_overridden_back_to_the_current_one(personas, tmp_path):
    row = _session(personas, tmp_path, "1.0.17")
    url = reverse("session-detail", args=[row.pk])
    html = personas.client("viewer").get(url, {"profile": "claude-code",
                                               "cc_bash_mode": "persist"}).content.decode()
    assert _selected(html, "cc_bash_mode") == "persist"
    assert "cc_bash_mode=persist" in html  # kept in the page's links as an override
    assert _selected(html, "cc_mcp_mode") == "error"  # the rest of the era stays


def test_a_current_release_says_so(personas, tmp_path):
    row = _session(personas, tmp_path, "2.1.200")
    html = personas.client("viewer").get(reverse("session-detail", args=[row.pk])).content.decode()
    assert "Claude Code 2.1.200: current behaviour" in html
    assert _selected(html, "cc_bash_mode") == "persist"


def test_a_profile_saved_from_the_page_keeps_the_eras_values(personas, tmp_path):
    """A saved profile takes no era of its own, so saving writes down what the page showed."""
    from ctxsim.replays.models import SavedProfile

    row = _session(personas, tmp_path, "1.0.17")
    response = personas.client("owner").post(reverse("profile-save", args=[row.pk]), {
        "profile": "claude-code", "cc_mcp_mode": "truncate", "name": "as in 1.0.17"})
    assert response.status_code == 302  # to the page, under the saved profile
    saved = SavedProfile.objects.get(team=personas.team, name="as in 1.0.17")
    assert saved.params["cc_bash_mode"] == "middle"
    assert saved.params["cc_persist_threshold_chars"] is None
    # The user's override (truncate, the current default) wins over the era's error.
    assert "cc_mcp_mode" not in saved.params


def test_a_gemini_cli_session_names_its_era_the_same_way(personas, tmp_path):
    """Issue 29: the part-2 agents' eras go through the same path; a Gemini CLI file records
    no version, so the page says the current behaviour applies."""
    from tests.importers.agent_fixtures import gemini_jsonl

    path = tmp_path / "gemini.jsonl"
    path.write_bytes(gemini_jsonl())
    outcome = import_transcript(path, team=personas.team, user=personas.users["owner"])
    finish_import(outcome.sessions)
    row = outcome.sessions[0]
    html = personas.client("viewer").get(reverse("session-detail", args=[row.pk])).content.decode()
    note = re.search(r'<p class="help" id="era-note">([^<]+)</p>', html)
    assert note and note.group(1) == ("Gemini CLI, version not recorded: current behaviour "
                                      "(no release switch applies).")
