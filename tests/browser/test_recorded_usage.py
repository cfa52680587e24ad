"""SPEC §11 in a real browser: the chart draws the provider's figures beside the lines."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ctxsim.transcripts.store import save_sessions
from tests.web.test_recorded_usage import FLAGGED_CALL, billed_session

pytestmark = pytest.mark.django_db(transaction=True)


def datasets(page) -> list[str]:
    return page.evaluate(
        "() => Chart.getChart(document.getElementById('tokens-chart'))"
        ".data.datasets.map(d => d.label)")


def test_the_chart_draws_recorded_points_flags_and_the_window_and_the_toggle_works(
    personas, live_server, login
):
    (session,) = save_sessions([billed_session()], team=personas.team,
                               user=personas.users["owner"])
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{session.pk}/?profile=chatcli&call={FLAGGED_CALL}")
    expect(page.locator("#tokens-chart")).to_have_attribute("data-ready", "1")
    labels = datasets(page)
    assert "raw history (calibrated)" in labels
    assert "recorded by the provider" in labels
    assert "flagged: context the transcript does not show" in labels
    assert any(label.startswith("claude-sonnet-4-5 context window") for label in labels)
    expect(page.locator("#call-usage")).to_contain_text("flagged: context the transcript")
    page.locator("#numbers-toggle").click()
    expect(page.locator("#calibration")).to_contain_text("raw estimates")
    expect(page.locator("#tokens-chart")).to_have_attribute("data-ready", "1")
    assert "raw history (estimate)" in datasets(page)
