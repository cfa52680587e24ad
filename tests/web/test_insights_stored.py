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
