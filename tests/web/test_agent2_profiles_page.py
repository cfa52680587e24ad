"""The session page under the part-2 agents' profiles (SPEC-agents-2): it renders their
thresholds form, and the form submitted as shown applies without errors."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ctxsim.generator import generate_session
from ctxsim.pipeline.params import PARAMS
from ctxsim.pipeline.profiles import PROFILES, param_specs
from ctxsim.transcripts.store import save_sessions
from tests.web.test_agent_profiles_page import form_values

pytestmark = pytest.mark.django_db

NEW_PROFILES = ("gemini-cli", "openhands-v1", "cline", "roo-code", "aider", "opencode",
                "mini-swe-agent")


@pytest.fixture
def row(personas):
    session = generate_session(12, seed=3, oversize_every=3)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


@pytest.mark.parametrize("profile", NEW_PROFILES)
def test_the_page_renders_the_agents_fields_and_an_unchanged_submit_applies(
        client, personas, row, profile):
    client.force_login(personas.users["owner"])
    url = reverse("session-detail", args=[row.pk])
    page = client.get(url, {"profile": profile})
    assert page.status_code == 200
    html = page.content.decode()
    fields = {name for name, _ in form_values(html)}
    own = [s.name for s in param_specs(PROFILES[profile].stages)
           if s.name not in ("counter", "image_rule", "loop_mode", "anchor_text")]
    assert own and all(any(f == n or f.startswith(n + ".") for f in fields) for n in own), (
        [n for n in own if not any(f == n or f.startswith(n + ".") for f in fields)])
    again = client.get(url, form_values(html), headers={"HX-Request": "true",
                                                        "HX-Target": "div#replay"})
    assert again.status_code == 200
    assert "<strong>Not applied</strong>" not in again.content.decode()


def test_a_changed_value_applies_and_a_bad_one_is_named(client, personas, row):
    client.force_login(personas.users["owner"])
    url = reverse("session-detail", args=[row.pk])
    html = client.get(url, {"profile": "roo-code"}).content.decode()
    values = dict(form_values(html))
    values["roo_condense_percent"] = "50"
    ok = client.get(url, values, headers={"HX-Request": "true", "HX-Target": "div#replay"})
    assert "<strong>Not applied</strong>" not in ok.content.decode()
    values["roo_condense_percent"] = "101"
    bad = client.get(url, values, headers={"HX-Request": "true", "HX-Target": "div#replay"})
    text = bad.content.decode()
    assert "<strong>Not applied</strong>" in text and "must be between 5 and 100" in text
    assert PARAMS["roo_condense_percent"].default == 100
