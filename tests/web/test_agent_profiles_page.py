"""The session page under the Claude Code and Anthropic profiles (SPEC-agents §2.5.9): it
renders, and its thresholds form submitted as shown applies without errors."""

from __future__ import annotations

import html as html_lib
import json
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
    html = client.get(url, {"profile": "claude-code", "call": 2}).content.decode()
    chart = json.loads(re.search(r'id="chart-data" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["recorded"] == [2] and chart["predicted"] == []
    assert "Claude Code compacted here: 167,648 tokens before (auto)." in html
    table = html[html.index('id="recorded-vs-simulated"'):]
    assert "not predicted" in table[:table.index("</table>")]


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
