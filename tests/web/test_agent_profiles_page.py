"""The session page under the Claude Code and Anthropic profiles (SPEC-agents §2.5.9): it
renders, and its thresholds form submitted as shown applies without errors."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse

from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

AGENT_PROFILES = ("claude-code", "claude-code-recorded", "claude-code-thinking",
                  "claude-code-context-editing", "anthropic-compact",
                  "anthropic-context-management")


@pytest.fixture
def row(personas):
    session = generate_session(12, seed=3, oversize_every=3)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def form_values(html: str) -> list[tuple[str, str]]:
    """What a browser submits for the #settings form as rendered (first option when none
    is selected)."""
    form = html[html.index('id="settings"'):]
    form = form[:form.index("</form>")]
    out: list[tuple[str, str]] = []
    for tag in re.findall(r'<input type="(?:text|number|hidden)"[^>]*>', form):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'\svalue="([^"]*)"', tag)
        out.append((name.group(1), value.group(1) if value else ""))
    for m in re.finditer(r'<select name="([^"]+)"[^>]*>(.*?)</select>', form, re.S):
        options = re.findall(r"<option([^>]*)>([^<]*)</option>", m.group(2))
        chosen = next((text for attrs, text in options if "selected" in attrs),
                      options[0][1] if options else "")
        out.append((m.group(1), chosen))
    return [(k, html_lib.unescape(v)) for k, v in out]


@pytest.mark.parametrize("profile", AGENT_PROFILES)
def test_the_page_renders_and_its_form_applies_unchanged(client, personas, row, profile):
    client.force_login(personas.users["owner"])
    url = reverse("session-detail", args=[row.pk])
    page = client.get(url, {"profile": profile})
    assert page.status_code == 200
    html = page.content.decode()
    again = client.get(url, form_values(html), headers={"HX-Request": "true",
                                                        "HX-Target": "div#replay"})
    assert again.status_code == 200
    assert "<strong>Not applied</strong>" not in again.content.decode()


def test_a_claude_code_session_opens_with_its_own_agents_profile(client, personas):
    from pathlib import Path

    from ctxsim.importers import load

    fixtures = Path(__file__).parent.parent / "importers" / "fixtures"
    fixture = fixtures / "claude-code-compacted.jsonl"
    stored = save_sessions(load(fixture).sessions, team=personas.team,
                           user=personas.users["owner"])[0]
    client.force_login(personas.users["owner"])
    page = client.get(reverse("session-detail", args=[stored.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'name="profile" value="claude-code"' in html


def test_other_sessions_still_open_with_chatcli(client, personas, row):
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[row.pk])).content.decode()
    assert 'name="profile" value="chatcli"' in html
