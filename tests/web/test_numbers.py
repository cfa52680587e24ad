"""Numbers read as numbers: thousands separators, tokens added said as such, one heading
(issue 19)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_session(personas):
    session = generate_session(24, seed=5, oversize_every=4)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def figure(html: str, label: str) -> str:
    return re.search(rf"<small>{label}[^<]*</small><strong>([^<]*)</strong>", html).group(1)


def test_token_figures_have_thousands_separators(personas, long_session):
    html = personas.client("viewer").get(
        reverse("session-detail", args=[long_session.pk]) + "?profile=chatcli&call=20"
    ).content.decode()
    peak = figure(html, "Peak input")
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", peak), peak
    sent = re.search(r"sent · estimate <strong>([^<]*)</strong>", html).group(1)
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", sent), sent
    # The call view's own rows (rendered in Python) too.
    tokens = re.findall(r'<span class="tokens">([\d,]+) tok', html)
    big = [t for t in tokens if len(t.replace(",", "")) > 3]
    assert big and all("," in t for t in big)
    compare = personas.client("viewer").get(
        reverse("session-compare", args=[long_session.pk]) + "?a=chatcli&b=none&call=20"
    ).content.decode()
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", figure(compare, "Peak"))


def test_tokens_a_profile_adds_read_as_added_not_as_negative_savings(personas, long_session):
    html = personas.client("viewer").get(
        reverse("session-detail", args=[long_session.pk])
        + "?profile=none&anchor_text=Remember+the+plan.&call=3"
    ).content.decode()
    assert "−" not in html and not re.search(r">-\d", html)
    assert figure(html, "Added")
    assert re.search(r'<td class="num">[\d,]+ added</td>', html)


def test_the_activity_page_has_one_activity_heading(personas, long_session):
    html = personas.client("viewer").get(
        reverse("session-activity", args=[long_session.pk])).content.decode()
    assert len(re.findall(r"<h[12][^>]*>Activity</h[12]>", html)) == 1


def test_stage_reports_and_notes_group_their_numbers_but_not_names_or_settings(
    personas, long_session
):
    from ctxsim.replays.templatetags.numbers import group_numbers

    html = personas.client("viewer").get(
        reverse("session-detail", args=[long_session.pk]) + "?profile=chatcli&call=20"
    ).content.decode()
    reports = html.split('<ul class="reports">')[1].split("</ul>")[0]
    assert re.search(r"\(\d{1,3}(,\d{3})+ → \d{1,3}(,\d{3})+ bytes\)", reports), reports
    assert group_numbers("CHATCLI_TOOL_RESULT_MAX_CHARS=20000 over 20000 bytes, "
                         "file budget_call_12345.txt, v1.188.0, -1234") == (
        "CHATCLI_TOOL_RESULT_MAX_CHARS=20000 over 20,000 bytes, "
        "file budget_call_12345.txt, v1.188.0, -1,234")
