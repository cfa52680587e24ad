"""The team overview end to end: it opens with a progress bar, the worker fills it in place,
and its charts draw what the tables hold."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_overview_fills_in_as_the_worker_stores_figures(personas, login, live_server,
                                                            worker):
    save_sessions([generate_session(10 + i, seed=i, oversize_every=3) for i in range(6)],
                  team=personas.team, user=personas.users["owner"])
    page = login("viewer")
    page.click("nav >> text=Overview")
    results = page.locator("#overview-results")
    expect(results).to_have_attribute("data-complete", "false")
    expect(page.locator("progress.overview-progress")).to_be_visible()
    page.evaluate("window.__same_page = true")
    worker.start()
    expect(results).to_have_attribute("data-complete", "true", timeout=120_000)
    worker.stop()
    assert page.evaluate("window.__same_page") is True  # polled in place, no reload
    expect(page.locator('[data-field="sent_tokens"]').first).not_to_have_text("0")
    bins = page.evaluate("""() => Chart.getChart('peak-chart').data.datasets
        .map(d => d.data.reduce((a, b) => a + b, 0))""")
    assert bins == [6, 6]  # every session in one bin, for each of the two profiles
    tools = page.evaluate("() => Chart.getChart('tools-chart').data.labels")
    assert tools and len(tools) == page.locator(".tokens-by-tool tbody tr").count()
    if os.environ.get("CTXSIM_SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["CTXSIM_SCREENSHOT_DIR"], "overview.png"),
                        full_page=True)
