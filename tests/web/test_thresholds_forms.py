"""Every built-in profile's thresholds form, read from the page as rendered and submitted as a
browser submits it (issue 26): unchanged it applies and changes nothing, every number raised by
one applies, and a bad value of each field kind is refused with a message naming the field.

Sessions of five formats, from the importers' fixtures; every profile the page's profile menu
offers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.urls import reverse

from ctxsim.importers import load
from ctxsim.pipeline.params import PARAMS
from ctxsim.pipeline.profiles import PROFILES
from ctxsim.transcripts.store import save_sessions
from tests.shared import SHARED_DIR, shared_files
from tests.web.forms import Control, read_form, submission

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "importers" / "fixtures"
FORMATS = {
    "claude-code": "claude-code-small.jsonl",
    "codex-legacy": "codex-legacy-session-items.json",
    "openhands": "openhands-trajectory-export.json",
    "chatcli": "chatcli-session-v2.json",
    "openai-chat": "openai-chat-request.json",
    "codex": None,  # a real Codex ≥0.40 rollout from ../shared, when it is there
}
# What the page's own view state adds to a URL beside the replay's settings.
VIEW_STATE = {"profile", "call", "numbers"}


def _source(fmt: str) -> Path:
    if FORMATS[fmt] is not None:
        return FIXTURES / FORMATS[fmt]
    files = shared_files("transcripts/codex-rollout", "*.jsonl")
    if not files:
        pytest.skip(f"no Codex rollout in the shared transcripts at {SHARED_DIR}")
    return min(files, key=lambda path: path.stat().st_size)


@pytest.fixture
def sessions(personas):
    """sessions(fmt): a stored session of that format (imported on first use)."""
    stored = {}

    def get(fmt: str):
        if fmt not in stored:
            result = load(_source(fmt))
            row = save_sessions(result.sessions[:1], team=personas.team,
                                user=personas.users["owner"])[0]
            assert row.format == fmt
            stored[fmt] = row
        return stored[fmt]
    return get


def _page(client, row, query):
    url = reverse("session-detail", args=[row.pk])
    response = client.get(url, query)
    if response.status_code == 302:
        location = response["Location"]
        return response, client.get(location)
    return response, response


def _overrides(response) -> dict[str, str]:
    """The replay settings a submitted form landed on (its canonical URL), view state aside."""
    assert response.status_code == 302, response.content.decode()[:2000]
    query = urlsplit(response["Location"]).query
    return {k: v for k, v in parse_qsl(query, keep_blank_values=True) if k not in VIEW_STATE}


def _form(client, row, profile) -> list[Control]:
    _, page = _page(client, row, {"profile": profile})
    assert page.status_code == 200
    html = page.content.decode()
    offered = [c for c in read_form(html, "profile-form") if c.name == "profile"][0].options
    assert set(PROFILES) <= set(offered)
    return read_form(html, "settings")


def _errors(html: str) -> str:
    """The form's error list as text ("" when the form applied)."""
    start = html.index('id="form-errors"')
    region = html[start:html.index("</div>", start)]
    return " | ".join(re.sub(r"<[^>]+>", "", item) for item in
                      re.findall(r"<li>(.*?)</li>", region, re.S))


def _numbers(controls: list[Control]) -> list[Control]:
    return [c for c in controls if c.type == "number" and c.value.strip()]


def _moved(control: Control) -> str:
    """The number raised by one; at its rendered maximum (e.g. a percent at 100), one below."""
    at_max = control.max and int(control.value) >= int(control.max)
    return str(int(control.value) + (-1 if at_max else 1))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("profile", PROFILES)
def test_the_form_submitted_unchanged_applies_and_changes_nothing(
        client, personas, sessions, fmt, profile):
    client.force_login(personas.users["owner"])
    controls = _form(client, sessions(fmt), profile)
    response, page = _page(client, sessions(fmt), submission(controls))
    html = page.content.decode()
    assert page.status_code == 200
    assert not _errors(html), _errors(html)
    if response.status_code == 302:
        assert _overrides(response) == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_each_number_raised_by_one_applies(client, personas, sessions, profile):
    client.force_login(personas.users["owner"])
    row = _row_for(sessions, profile)
    controls = _form(client, row, profile)
    for control in _numbers(controls):
        raised = _moved(control)
        response, page = _page(client, row, submission(controls, **{control.name: raised}))
        assert not _errors(page.content.decode()), (control.name, _errors(page.content.decode()))
        assert _overrides(response).get(control.name) == raised, control.name


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("profile", PROFILES)
def test_all_numbers_raised_together_apply_on_every_format(
        client, personas, sessions, fmt, profile):
    client.force_login(personas.users["owner"])
    controls = _form(client, sessions(fmt), profile)
    raised = {c.name: _moved(c) for c in _numbers(controls)}
    response, page = _page(client, sessions(fmt), submission(controls, **raised))
    assert not _errors(page.content.decode()), _errors(page.content.decode())
    if raised:
        landed = _overrides(response)
        assert all(landed.get(name) == value for name, value in raised.items()), landed


# A value each field kind refuses, typed where a browser lets a person type it (a number field
# takes "-5"; a select is sent a value it does not offer, as a hand-edited URL would).
BAD = {"int": "-5", "optional-int": "-5", "number": "-5", "object.value": "-5",
       "choice": "bogus", "bool": "bogus", "object.type": "bogus", "json": "{", "toml": "= 1",
       "map": "Read", "limits": "Read=abc"}


def _kind(control: Control) -> str:
    base, _, part = control.name.partition(".")
    spec = PARAMS.get(base)
    if spec is None:
        return ""
    return f"{spec.kind}.{part}" if spec.kind == "object" else spec.kind


def unused_number(controls: list[Control], control: Control) -> bool:
    """A typed value's number is not read when its kind is "none" or "all"."""
    kind = control.name.replace(".value", ".type")
    return next(c.value for c in controls if c.name == kind) in ("none", "all")


def _row_for(sessions, profile):
    return sessions("codex-legacy" if profile.startswith("codex") else
                    "openhands" if profile.startswith("openhands") else "claude-code")


@pytest.mark.parametrize("profile", PROFILES)
def test_a_bad_value_of_each_field_kind_is_refused_naming_the_field(
        client, personas, sessions, profile):
    client.force_login(personas.users["owner"])
    row = _row_for(sessions, profile)
    controls = _form(client, row, profile)
    tried = set()
    for control in controls:
        kind = _kind(control)
        if kind not in BAD or kind == "object.value" and unused_number(controls, control):
            continue
        tried.add(kind)
        _, page = _page(client, row, submission(controls, **{control.name: BAD[kind]}))
        errors = _errors(page.content.decode())
        spec = PARAMS[control.name.partition(".")[0]]
        assert f"{spec.label} ({spec.name}):" in errors, (control.name, errors)
        assert "Tool=@plugin" not in errors or spec.name == "tool_caps", errors
    assert tried, "no field of this profile can be refused?"


def _submit(client, row, profile, **changes):
    controls = _form(client, row, profile)
    names = {c.name for c in controls}
    assert set(changes) <= names, set(changes) - names
    response, page = _page(client, row, submission(controls, **changes))
    return response, _errors(page.content.decode())


@pytest.mark.parametrize("value", ["true", "false"])
def test_codex_use_recorded_policy_applies_both_ways(client, personas, sessions, value):
    client.force_login(personas.users["owner"])
    response, errors = _submit(client, sessions("codex-legacy"), "codex",
                               codex_use_recorded_policy=value)
    assert not errors
    assert _overrides(response) == ({} if value == "true" else
                                    {"codex_use_recorded_policy": "false"})


def test_codex_config_takes_toml_and_a_truncation_policy_its_mode(client, personas, sessions):
    client.force_login(personas.users["owner"])
    toml = 'model_auto_compact_token_limit = 60000\r\nmodel = "gpt-5-codex"\r\n'
    response, errors = _submit(
        client, sessions("codex-legacy"), "codex", codex_config=toml,
        **{"codex_truncation_policy.type": "bytes", "codex_truncation_policy.value": "10000"})
    assert not errors
    landed = _overrides(response)
    assert landed["codex_truncation_policy.type"] == "bytes"
    assert landed["codex_truncation_policy.value"] == "10000"
    # The page shows the config back as TOML, which submits unchanged.
    page = client.get(response["Location"]).content.decode()
    area = [c for c in read_form(page, "settings") if c.name == "codex_config"][0]
    assert area.tag == "textarea"
    assert "model_auto_compact_token_limit = 60000" in area.value
    again, errors = _page(client, sessions("codex-legacy"), submission(
        read_form(page, "settings")))
    assert not _errors(errors.content.decode())


def test_codex_config_refusals_are_written_for_it(client, personas, sessions):
    client.force_login(personas.users["owner"])
    _, errors = _submit(client, sessions("codex-legacy"), "codex",
                        codex_config='{"model_auto_compact_token_limit": 60000}')
    assert "Codex config (codex_config): not valid TOML" in errors
    _, errors = _submit(client, sessions("codex-legacy"), "codex",
                        codex_config="model_auto_compact_token_limit = 1.5")
    assert "model_auto_compact_token_limit: expected an integer" in errors
    assert "Tool=@plugin" not in errors


def test_claude_code_env_takes_json(client, personas, sessions):
    client.force_login(personas.users["owner"])
    response, errors = _submit(client, sessions("claude-code"), "claude-code",
                               claude_env='{"BASH_MAX_OUTPUT_LENGTH": "60000"}')
    assert not errors
    assert _overrides(response) == {"claude_env": '{"BASH_MAX_OUTPUT_LENGTH": "60000"}'}
    _, errors = _submit(client, sessions("claude-code"), "claude-code",
                        claude_env="BASH_MAX_OUTPUT_LENGTH=60000")
    assert "Claude Code env (claude_env): not valid JSON" in errors
    assert "Tool=@plugin" not in errors


def test_an_openhands_condenser_is_written_as_its_json_table(client, personas, sessions):
    client.force_login(personas.users["owner"])
    row = sessions("openhands")
    response, errors = _submit(client, row, "openhands", openhands_condenser_config=(
        '{"type": "recent", "max_events": 10}'))
    assert not errors
    page = client.get(response["Location"]).content.decode()
    area = [c for c in read_form(page, "settings") if c.name == "openhands_condenser_config"]
    assert json.loads(area[0].value) == {"type": "recent", "keep_first": 1, "max_events": 10}
    _, errors = _submit(client, row, "openhands",
                        openhands_condenser_config='{"type": "recent", "value": 10}')
    assert "OpenHands condenser (openhands_condenser_config): value: not a field" in errors


def test_the_mcp_notice_keeps_its_leading_line_breaks(client, personas, sessions):
    client.force_login(personas.users["owner"])
    controls = _form(client, sessions("claude-code"), "claude-code")
    notice = [c for c in controls if c.name == "cc_mcp_truncation_notice"][0]
    assert notice.tag == "textarea"
    assert notice.value == "\r\n\r\n[ctxsim: MCP output truncated at {max} tokens]"


def test_a_refusal_through_htmx_names_the_field_by_its_label(client, personas, sessions):
    client.force_login(personas.users["owner"])
    row = sessions("codex-legacy")
    response = client.get(reverse("session-detail", args=[row.pk]),
                          submission(_form(client, row, "codex"), codex_config="= 1"),
                          headers={"HX-Request": "true", "HX-Target": "div#replay"})
    assert response.status_code == 200
    assert "Codex config (<code>codex_config</code>): not valid TOML" in response.content.decode()


@pytest.mark.parametrize(("fmt", "profile", "changes"), [
    ("codex-legacy", "codex", {"codex_config": "model_auto_compact_token_limit = 60000\r\n",
                               "codex_use_recorded_policy": "false"}),
    ("openhands", "openhands", {"openhands_condenser_config":
                                '{"type": "recent", "max_events": 10}'}),
    ("claude-code", "claude-code", {"claude_env": '{"BASH_MAX_OUTPUT_LENGTH": "60000"}',
                                    "cc_mcp_truncation_notice": "\r\n\r\n[cut at {max}]"}),
])
def test_a_team_profile_saved_from_the_form_round_trips_too(client, personas, sessions, fmt,
                                                            profile, changes):
    from ctxsim.replays.models import SavedProfile

    client.force_login(personas.users["owner"])
    row = sessions(fmt)
    response, errors = _submit(client, row, profile, **changes)
    assert not errors
    page = client.get(response["Location"]).content.decode()
    save = submission(read_form(page, "save-profile"), name=f"mine {profile}")
    saving = client.post(reverse("profile-save", args=[row.pk]), urlencode(save),
                         content_type="application/x-www-form-urlencoded")
    assert saving.status_code == 302
    saved = SavedProfile.objects.get(name=f"mine {profile}")
    controls = _form(client, row, saved.ref)
    assert {c.name: c.value for c in controls}.keys() >= changes.keys()
    for name, typed in changes.items():
        shown = next(c.value for c in controls if c.name == name)
        assert shown.replace("\r\n", "\n").strip() == typed.replace("\r\n", "\n").strip() \
            or json.loads(shown).items() >= json.loads(typed).items(), (name, shown)
    response, page = _page(client, row, submission(controls))
    assert not _errors(page.content.decode())
    if response.status_code == 302:
        assert _overrides(response) == {}
