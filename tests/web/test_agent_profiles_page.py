"""The session page under the Claude Code and Anthropic profiles (SPEC-agents §2.5.9): it
renders, and its thresholds form submitted as shown applies without errors."""

from __future__ import annotations

import html as html_lib
import json
import re
from urllib.parse import urlencode

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


def _compacted_session(personas):
    from pathlib import Path

    from ctxsim.importers import load

    fixtures = Path(__file__).parent.parent / "importers" / "fixtures"
    fixture = fixtures / "claude-code-compacted.jsonl"
    return save_sessions(load(fixture).sessions, team=personas.team,
                         user=personas.users["owner"])[0]


def test_the_recorded_compaction_is_marked_on_the_chart_and_in_the_call_view(client, personas):
    stored = _compacted_session(personas)
    client.force_login(personas.users["owner"])
    url = reverse("session-detail", args=[stored.pk])
    # The counter token source: anchored on the bill, call 1 (billed 167,006) is already over
    # the threshold, one call before Claude Code compacted (see the test below).
    html = client.get(url, {"profile": "claude-code", "call": 2, "cc_token_source": "counter"}
                      ).content.decode()
    chart = json.loads(re.search(r'id="chart-data" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["recorded"] == [2] and chart["predicted"] == []
    assert "Claude Code compacted here: 167,648 tokens before (auto)." in html
    table = html[html.index('id="recorded-vs-simulated"'):]
    assert "not predicted" in table[:table.index("</table>")]


def test_anchored_on_the_bill_the_compaction_is_predicted_where_the_bill_crosses(client,
                                                                                 personas):
    stored = _compacted_session(personas)
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[stored.pk]),
                      {"profile": "claude-code", "call": 1}).content.decode()
    chart = json.loads(re.search(r'id="chart-data" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["predicted"] == [1] and chart["recorded"] == [2]
    assert chart["raw"][1] == 167_006  # the provider's tokens: the bill itself
    assert "the provider's tokens</strong>, anchored on the recorded bill" in html


def test_a_lower_threshold_moves_the_simulated_compaction_earlier_in_the_list(client, personas):
    stored = _compacted_session(personas)
    client.force_login(personas.users["owner"])
    url = reverse("session-detail", args=[stored.pk])
    query = {"profile": "claude-code", "counter": "bytes4", "cc_context_window": "60",
             "cc_max_output_tokens": "10", "cc_autocompact_buffer_tokens": "10", "call": "0"}
    html = client.get(url, query, headers={"HX-Request": "true", "HX-Target": "div#replay"}
                      ).content.decode()
    assert "<strong>Not applied</strong>" not in html
    chart = json.loads(re.search(r'id="chart-data" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["predicted"] and chart["predicted"][0] < 2
    table = html[html.index('id="recorded-vs-simulated"'):]
    assert "earlier" in table[:table.index("</table>")]


def _calls(predicted_at: list[int], n: int = 6) -> list[dict]:
    events = {"kind": "predicted", "tokens_before": 100}
    return [{"i": i, "resp": 2 * i + 1, "raw": 10 * i,
             "reports": {"claude_code_autocompact": {
                 "tokens_before": 5 * i, "compaction_events": [events] if i in predicted_at
                 else []}}} for i in range(n)]


def test_each_recorded_compaction_is_paired_with_the_first_prediction_since_the_last():
    from ctxsim.replays.analysis import recorded_vs_simulated

    # Calls answer messages 1, 3, 5, …: messages 4 and 9 belong to calls 2 and 4.
    recorded = [{"source": "claude-code", "message_index": 4, "kind": "summary",
                 "trigger": "auto", "pre_tokens": 1000},
                {"source": "claude-code", "message_index": 9, "kind": "summary",
                 "trigger": "manual", "pre_tokens": 2000},
                {"source": "claude-code", "message_index": 6, "kind": "microcompact"}]
    rows = recorded_vs_simulated(_calls([1, 2, 5]), recorded)
    assert [(r["recorded_call"], r["predicted_call"], r["relation"]) for r in rows] == [
        (2, 1, "earlier"), (4, 5, "later"), (None, 2, "not_recorded")]
    assert rows[0]["tokens_at_recorded"] == 10  # the stage's own tokens_before there
    rows = recorded_vs_simulated(_calls([]), recorded)
    assert [r["relation"] for r in rows] == ["none", "none"]
    rows = recorded_vs_simulated(_calls([2]), recorded[:1])
    assert [(r["predicted_call"], r["relation"]) for r in rows] == [(2, "same")]


def _table(html: str) -> str:
    table = html[html.index('id="recorded-vs-simulated"'):]
    return table[:table.index("</table>")]


def _cells(table: str) -> list[list[str]]:
    rows = re.findall(r"<tr class=\"rel-[^\"]+\">(.*?)</tr>", table, re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r,
                                                                    re.S)] for r in rows]


# The counter token source: these tests are about calibrating ctxsim's own count.
LOWER = {"profile": "claude-code", "counter": "bytes4", "cc_context_window": "60",
         "cc_max_output_tokens": "10", "cc_autocompact_buffer_tokens": "10",
         "cc_token_source": "counter"}


def test_the_compactions_list_shows_calibrated_tokens_at_both_calls(client, personas):
    from ctxsim.pipeline.calibration import Calibration
    from ctxsim.replays import services
    from ctxsim.replays.analysis import recorded_vs_simulated
    from ctxsim.replays.state import settings_from_query

    stored = _compacted_session(personas)
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[stored.pk]), LOWER).content.decode()
    settings, errors = settings_from_query(LOWER, personas.team)
    assert not errors
    run = services.summary_for(stored, settings)
    calibration = Calibration.from_json(run.totals["calibration"])
    assert calibration is not None
    [row] = [r for r in recorded_vs_simulated(run.calls, stored.meta["recorded_compactions"])
             if r["recorded_call"] is not None]
    assert row["relation"] == "earlier"
    at_recorded = calibration.value(row["tokens_at_recorded"])
    at_predicted = calibration.value(row["tokens_at_predicted"])
    # The calibration adds the prompt the transcript does not show: never the raw estimate.
    assert at_recorded != row["tokens_at_recorded"]
    table = _table(html)
    assert "Agent's count before (recorded)" in table and "ctxsim there (calibrated)" in table
    cells = _cells(table)[0]
    assert cells[2] == "167,648"  # the agent's own preTokens
    assert cells[3] == f"{at_recorded:,}" and cells[5] == f"{at_predicted:,}"
    raw = _cells(_table(client.get(reverse("session-detail", args=[stored.pk]),
                                   {**LOWER, "numbers": "raw"}).content.decode()))[0]
    assert raw[3] == f"{row['tokens_at_recorded']:,}"
    assert raw[5] == f"{row['tokens_at_predicted']:,}"


def test_the_compactions_list_says_uncalibrated_without_recorded_usage(client, personas,
                                                                       tmp_path):
    from pathlib import Path

    from ctxsim.importers import load

    fixture = (Path(__file__).parent.parent / "importers" / "fixtures"
               / "claude-code-compacted.jsonl")
    lines = []
    for line in fixture.read_text().splitlines():
        record = json.loads(line)
        (record.get("message") or {}).pop("usage", None)
        lines.append(json.dumps(record))
    bare = tmp_path / "no-usage.jsonl"
    bare.write_text("\n".join(lines) + "\n")
    stored = save_sessions(load(bare).sessions, team=personas.team,
                           user=personas.users["owner"])[0]
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[stored.pk]), LOWER).content.decode()
    table = _table(html)
    assert "ctxsim there (uncalibrated)" in table
    assert "the session records no usage" in html


@pytest.mark.parametrize(("tool", "text", "ignored"), [
    ("claude-code", json.dumps({"env": {"BASH_MAX_OUTPUT_LENGTH": "40000"},
                                "permissions": {"allow": ["Bash"]}}), "permissions"),
    ("codex", 'model = "gpt-5.2-codex"\napproval_policy = "never"\n'
              "[profiles.fast]\nmodel = \"o3\"\n", "approval_policy"),
    ("openhands", '[condenser]\ntype = "recent"\nkeep_first = 1\nmax_events = 40\n'
                  '[llm]\nmax_message_chars = 20000\nmodel = "x"\n', "[llm] model"),
])
def test_an_import_by_paste_says_which_keys_it_ignored(client, personas, row, tool, text,
                                                        ignored):
    from ctxsim.replays.models import SavedProfile

    client.force_login(personas.users["owner"])
    assert f'<option value="{tool}">' in client.get(
        reverse("session-detail", args=[row.pk])).content.decode()
    response = client.post(reverse("profile-import", args=[row.pk]),
                           {"format": tool, "text": text, "name": f"pasted {tool}"},
                           follow=True)
    assert response.status_code == 200
    saved = SavedProfile.objects.get(name=f"pasted {tool}")
    flash = re.search(r'<ul class="flash">(.*?)</ul>', response.content.decode(), re.S)
    assert flash is not None
    notes = html_lib.unescape(flash.group(1))
    assert f"Imported {saved.name}; not read: {ignored}" in notes
    if tool == "codex":
        assert "[profiles.fast] (profile tables are not merged; ignored)" in notes
    # The page it opens is the imported profile's.
    assert urlencode({"profile": saved.ref}) in response.redirect_chain[-1][0]


def test_an_import_with_nothing_ignored_adds_no_note(client, personas, row):
    client.force_login(personas.users["owner"])
    response = client.post(reverse("profile-import", args=[row.pk]),
                           {"format": "claude-code", "name": "env only",
                            "text": json.dumps({"env": {"BASH_MAX_OUTPUT_LENGTH": "40000"}})},
                           follow=True)
    assert response.status_code == 200
    assert '<ul class="flash">' not in response.content.decode()


X_NOTE = "ctxsim's default; not documented by Anthropic"


def _field_help(html: str, name: str) -> str:
    """The help paragraph that follows the control of parameter `name` in the form."""
    form = html[html.index('id="settings"'):]
    start = re.search(rf'name="{re.escape(name)}(\.type|\.value)?"', form).start()
    rest = form[start:]
    help_start = rest.index('<p class="help"')
    return html_lib.unescape(rest[help_start:rest.index("</p>", help_start)])


@pytest.mark.parametrize("profile", ["claude-code", "claude-code-recorded",
                                     "claude-code-thinking", "claude-code-context-editing"])
def test_every_x_default_is_marked_in_the_form_stage_rows_and_export(client, personas, row,
                                                                     profile):
    from ctxsim.pipeline.params import PARAMS
    from ctxsim.pipeline.profiles import PROFILES
    from ctxsim.pipeline.registry import STAGES, params_of

    chosen = PROFILES[profile]
    noted = [n for n in PARAMS if n in params_of(chosen.stages)
             and chosen.default_note(n).endswith("Anthropic")]
    assert "cc_bash_tools" in noted and len(noted) >= 12
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[row.pk]), {"profile": profile}
                      ).content.decode()
    for name in PARAMS:
        if name not in params_of(chosen.stages) or name == "env":
            continue
        assert (X_NOTE in _field_help(html, name)) == (name in noted), name
    stages = html[html.index('id="stages-form"'):]
    stages = html_lib.unescape(stages[:stages.index("</table>")])
    for stage, _ in chosen.stages:
        labels = [PARAMS[n].label for n in STAGES[stage].params if n in noted]
        if labels:
            assert f"ctxsim's defaults; not documented by Anthropic: {', '.join(labels)}" \
                in stages, stage
    export = html_lib.unescape(client.get(reverse("profile-export", args=[row.pk]),
                                          {"profile": profile}).content.decode())
    for name in noted:
        assert re.search(rf"\({name}\) = .* — {X_NOTE}", export), name


def test_a_chatcli_page_and_export_mark_no_default(client, personas, row):
    client.force_login(personas.users["owner"])
    html = client.get(reverse("session-detail", args=[row.pk])).content.decode()
    export = client.get(reverse("profile-export", args=[row.pk])).content.decode()
    form = html[html.index('id="settings"'):]
    assert 'class="x-default"' not in form[:form.index("</form>")]
    assert 'class="x-default"' not in export
    # The stage table still says it of the Claude Code stages one could turn on.
    rows = re.findall(r'<tr class="off">(.*?)</tr>', html, re.S)
    marked = [r for r in rows if "not documented by Anthropic" in html_lib.unescape(r)]
    assert len(marked) == 3 and all("<small>Claude Code</small>" in r for r in marked)


def test_with_token_source_usage_the_list_shows_the_stages_own_billed_measure(client,
                                                                             personas):
    from ctxsim.replays import services
    from ctxsim.replays.analysis import recorded_vs_simulated
    from ctxsim.replays.state import settings_from_query

    stored = _compacted_session(personas)
    client.force_login(personas.users["owner"])
    query = {"profile": "claude-code", "cc_token_source": "usage"}
    html = client.get(reverse("session-detail", args=[stored.pk]), query).content.decode()
    settings, errors = settings_from_query(query, personas.team)
    assert not errors
    run = services.summary_for(stored, settings)
    assert run.totals["calibration"]  # the session is calibrated, and still:
    [row] = recorded_vs_simulated(run.calls, stored.meta["recorded_compactions"])
    table = _table(html)
    assert "ctxsim there (billed)" in table and "not calibrated again" in html
    assert _cells(table)[0][3] == f"{row['tokens_at_recorded']:,}"
