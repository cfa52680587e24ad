"""The cache & information-loss page stores what it computed (issue 21): a second visit, from
any process, is a lookup — no replay, no cache simulation — and shows the same figures."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ctxsim.analysis import results
from ctxsim.analysis.models import SessionResult
from ctxsim.generator import generate_session
from ctxsim.replays.cache import REPLAYS
from ctxsim.transcripts.store import save_sessions


@pytest.fixture
def row(personas):
    session = generate_session(30, seed=4, oversize_every=3)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def _refuse(*args, **kwargs):
    raise AssertionError("replayed or simulated again")


def test_a_second_visit_reads_the_stored_results_and_shows_the_same_page(personas, row,
                                                                       monkeypatch):
    client = personas.client("viewer")
    url = reverse("session-insights", args=[row.pk])
    first = client.get(url)
    assert first.status_code == 200
    assert SessionResult.objects.filter(session=row).count() == 3  # none, chatcli, aivax
    monkeypatch.setattr(results, "replay", _refuse)
    monkeypatch.setattr(results, "analyse", _refuse)
    with REPLAYS.another_process():
        second = client.get(url)
    assert second.status_code == 200
    assert _figures(second) == _figures(first)


def _figures(response) -> str:
    # Per-response tokens (the CSP nonce, the CSRF token) aside, the pages are the same.
    html = response.content.decode()
    return re.sub(r'nonce="[^"]*"|[A-Za-z0-9+/=_-]{32,}', "", html)


def test_another_price_or_model_is_another_result(personas, row):
    client = personas.client("viewer")
    url = reverse("session-insights", args=[row.pk])
    client.get(url + "?profiles=chatcli")
    client.get(url + "?profiles=chatcli&price=1.5")
    client.get(url + "?profiles=chatcli&model=gpt-5")
    assert SessionResult.objects.filter(session=row).values("rule").distinct().count() == 3


def test_stored_results_go_with_their_session(personas, row):
    personas.client("viewer").get(reverse("session-insights", args=[row.pk]))
    row.delete()
    assert not SessionResult.objects.exists()


def test_the_session_page_shows_the_stored_headline_on_its_link_once_there_is_one(personas,
                                                                                  row):
    """Issue 30: the session page reads the one store of per-session results (beside its
    replay, never replaying for it): the link to the cache & information-loss page carries
    what that page stored for the same settings under the default cache rule."""
    client = personas.client("viewer")
    page = reverse("session-detail", args=[row.pk])
    before = client.get(page, follow=True).content.decode()
    assert 'id="insights-link"' in before and "insights-stored" not in before
    insights = client.get(reverse("session-insights", args=[row.pk]) + "?profiles=chatcli")
    shown = re.search(r'data-profile="chatcli" data-hit-rate="([0-9.]+)" data-cost="([0-9.]+)"',
                      insights.content.decode())
    assert shown is not None
    after = client.get(page, follow=True).content.decode()
    stored = re.search(r'class="muted insights-stored"[^>]*>· ([0-9.]+)% cached, ([^ ]+) ',
                       after)
    assert stored is not None, "the stored headline is not on the link"
    assert float(stored.group(1)) == pytest.approx(float(shown.group(1)), abs=0.05)
    # Another threshold is another replay: nothing stored for it yet.
    other = client.get(page + "?profile=chatcli&ccr=off",
                       follow=True).content.decode()
    assert "insights-stored" not in other


def test_an_agent_release_is_analysed_under_its_era_and_its_headline_reaches_the_page(
        personas, row):
    """Issue 25: the cache & information-loss page simulated a Claude Code session as the
    current release (its query parsed without the session), so its stored results had another
    settings key than the session page's and the page never showed their headline."""
    from ctxsim.pipeline.eras import VERSION_KEYS
    from ctxsim.replays.services import default_settings
    from ctxsim.transcripts.models import Session

    Session.objects.filter(pk=row.pk).update(
        format="claude-code", meta={**(row.meta or {}), VERSION_KEYS["claude-code"]: "2.0.30"})
    session = Session.objects.get(pk=row.pk)
    settings = default_settings(session)
    assert settings.era is not None and settings.profile_ref == "claude-code"
    client = personas.client("viewer")
    insights = client.get(reverse("session-insights", args=[row.pk]) + "?" + settings.query())
    assert insights.status_code == 200
    assert SessionResult.objects.filter(session=row, key=settings.key).exists()
    page = client.get(reverse("session-detail", args=[row.pk]), follow=True).content.decode()
    assert "insights-stored" in page
