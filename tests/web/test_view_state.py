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
    assert settings.run_config().values["env"] == {}
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
    assert saved.params["env"] == {"CHATCLI_TOOL_RESULT_MAX_CHARS": "8000"}


def test_a_profile_saved_with_an_empty_anchor_injects_nothing(personas):
    saved = SavedProfile.objects.create(
        team=personas.team, name="old", base="chatcli",
        stages=[["tool_cap", "dispatch"], ["microcompact", "persistent"],
                ["pairing", "persistent"], ["budget", "outgoing"]],
        params={"anchor_text": "", "env": {"present": "1"}})
    settings, errors = settings_from_query({"profile": saved.ref}, personas.team)
    assert errors == {}
    assert settings.run_config().values["anchor_text"] is None
    assert settings.run_config().values["env"] == {}


def page_url(row, query: str = "") -> str:
    return reverse("session-detail", args=[row.pk]) + (f"?{query}" if query else "")


def htmx(target: str) -> dict:
    return {"HX-Request": "true", "HX-Target": f"div#{target}"}


STATE = "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=2500"


def test_the_stage_and_profile_forms_carry_the_thresholds_and_the_call(personas, long_session):
    body = personas.client("viewer").get(page_url(long_session, STATE + "&call=7")).content
    html = body.decode()
    stages_form = html.split('id="stages-form"')[1].split("</form>")[0]
    assert 'name="env.CHATCLI_TOOL_RESULT_MAX_CHARS" value="2500"' in stages_form
    for form in ("settings", "stages-form", "profile-form"):
        assert f'name="call" value="7" form="{form}"' in html


def test_toggling_a_stage_without_javascript_keeps_thresholds_and_call(personas, long_session):
    client = personas.client("viewer")
    query = (STATE + "&stages.form=1&stage.tool_cap=on&phase.tool_cap=dispatch&order.tool_cap=10"
             "&stage.pairing=on&phase.pairing=persistent&order.pairing=30"
             "&stage.budget=on&phase.budget=outgoing&order.budget=40&call=7")
    response = client.get(page_url(long_session, query))
    assert response.status_code == 302
    location = response["Location"]
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in location and location.endswith("call=7")
    assert "microcompact" not in location


def test_an_in_place_edit_updates_every_link_that_carries_the_state(personas, long_session):
    client = personas.client("reviewer")
    html = client.get(page_url(long_session, STATE + "&call=7"), headers=htmx("replay"))
    html = html.content.decode()
    for link in ("trace-link", "export-link", "insights-link", "compare-link", "stages-state",
                 "save-state"):
        element = html.split(f'id="{link}"')[1].split(">")[0]
        assert 'hx-swap-oob="true"' in element, link
    compare = html.split('id="compare-link" href="')[1].split('"')[0]
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in compare and compare.endswith("call=7")
    stages = html.split('id="stages-state"')[1].split("</div>")[0]
    assert 'name="env.CHATCLI_TOOL_RESULT_MAX_CHARS" value="2500"' in stages


def test_stepping_to_another_call_moves_the_compare_link_with_it(personas, long_session):
    client = personas.client("viewer")
    html = client.get(page_url(long_session, STATE + "&call=8"), headers=htmx("call-view"))
    html = html.content.decode()
    assert html.lstrip().startswith('<div id="call-view"')
    compare = html.split('id="compare-link" href="')[1].split('"')[0]
    assert compare.endswith("call=8")
    assert 'hx-swap-oob="true"' in html.split('id="compare-link"')[1].split(">")[0]


def test_the_page_and_its_fragments_vary_on_the_htmx_headers(personas, long_session):
    response = personas.client("viewer").get(page_url(long_session, STATE))
    assert "HX-Request" in response["Vary"]


def test_compare_starts_from_the_session_pages_state(personas, long_session):
    client = personas.client("viewer")
    url = reverse("session-compare", args=[long_session.pk])
    html = client.get(f"{url}?{STATE}&call=5").content.decode()
    assert "with changed settings" in html
    assert 'name="env.CHATCLI_TOOL_RESULT_MAX_CHARS" value="2500"' in html
    crumbs = html.split('class="crumbs"')[1].split("</p>")[0]
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in crumbs and "call=5" in crumbs
    steps = html.split('id="compare-calls"')[1]
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in steps.split("next")[0]
    # Choosing another profile for side A in the form leaves the page's changes behind.
    other = client.get(f"{url}?{STATE}&a=aivax&b=none&call=5").content.decode()
    assert "with changed settings" not in other
    assert 'name="profile" value="aivax"' in other


# The thresholds form of the chatcli profile as the browser submits it, nothing typed.
UNTOUCHED_FORM = ("profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_BUDGET_CHARS="
                  "&env.CHATCLI_TOOL_RESULT_MAX_CHARS=&loop_mode=agent&ccr=on&tool_caps="
                  "&spill_dir=/tmp/chatcli-tool-results&anchor_text=&counter=cl100k_base")


def test_export_leaves_out_only_real_parameters_the_format_cannot_carry(personas, long_session):
    client = personas.client("viewer")
    url = reverse("profile-export", args=[long_session.pk])
    untouched = client.get(f"{url}?{UNTOUCHED_FORM}").content.decode()
    assert 'id="export-chatcli"' in untouched
    assert "Left out" not in untouched
    changed = client.get(f"{url}?{UNTOUCHED_FORM.replace('agent', 'coder')}"
                         "&env.CHATCLI_TOOL_RESULT_MAX_CHARS=9000").content.decode()
    left_out = changed.split("Left out")[1].split("</ul>")[0]
    assert "loop_mode" in left_out and "present" not in left_out
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=9000" in changed


def test_the_env_fields_marker_is_not_a_value(personas):
    settings, _ = settings_from_query(QueryDict(UNTOUCHED_FORM), personas.team)
    assert settings.config == {}
    cleared, _ = settings_from_query(
        QueryDict("profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS=9000"),
        personas.team)
    assert cleared.config["env"] == {"CHATCLI_TOOL_RESULT_MAX_CHARS": "9000"}
    again, _ = settings_from_query(QueryDict(cleared.query()), personas.team)
    assert again.config == cleared.config


def test_clearing_every_env_field_of_a_saved_profile_stays_cleared(personas):
    saved = SavedProfile.objects.create(
        team=personas.team, name="tight", base="chatcli",
        stages=[["tool_cap", "dispatch"], ["microcompact", "persistent"],
                ["pairing", "persistent"], ["budget", "outgoing"]],
        params={"env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "8000"}})
    cleared, _ = settings_from_query(
        QueryDict(f"profile={saved.ref}&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS="),
        personas.team)
    assert cleared.config == {"env": {}}
    again, _ = settings_from_query(QueryDict(cleared.query()), personas.team)
    assert again.run_config().values["env"] == {}


def test_every_optional_text_parameter_reads_an_empty_field_as_not_set(personas):
    from ctxsim.pipeline.params import PARAMS
    from ctxsim.replays.codecs import codec_of

    optional = [p for p in PARAMS.values() if p.default is None and p.kind in (
        "string", "optional-string")]
    assert {p.name for p in optional} >= {"anchor_text"}
    for spec in optional:
        assert spec.kind == "optional-string", spec.name
        present, value = codec_of(spec).decode(spec.name, {spec.name: ""}, {})
        assert present and value is None
