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


def test_a_corpus_sweep_runs_on_the_worker_and_a_front_point_becomes_a_profile(
    personas, login, live_server, worker
):
    from ctxsim.replays.models import SavedProfile

    save_sessions([generate_session(8 + i, seed=i, oversize_every=2) for i in range(5)],
                  team=personas.team, user=personas.users["owner"])
    page = login("reviewer")
    page.goto(f"{live_server.url}/overview/")
    page.click("text=Corpus sweep")
    expect(page.locator("html")).to_have_attribute("data-autosubmit", "ready")
    with page.expect_navigation(timeout=60_000):
        page.select_option("#corpus-profile-select", "aivax")
    expect(page.locator("#param1")).to_have_value("toolContextCount")
    page.fill("#start1", "1")
    page.fill("#stop1", "3")
    page.fill("#step1", "1")
    page.click("#run-corpus-sweep")
    status = page.locator("#corpus-status")
    expect(status).to_have_attribute("data-status", "queued")
    expect(page.locator("progress.sweep-progress")).to_be_visible()
    worker.start()
    expect(status).to_have_attribute("data-status", "done", timeout=120_000)
    worker.stop()
    counts = page.evaluate("""() => Chart.getChart('corpus-chart').data.datasets
        .map(d => d.data.length)""")
    assert counts[0] >= 1 and sum(counts) == 3
    if os.environ.get("CTXSIM_SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["CTXSIM_SCREENSHOT_DIR"], "corpus.png"),
                        full_page=True)
    row = page.locator(".corpus-points tr.front").first
    row.locator("input[name=name]").fill("fleet best")
    with page.expect_navigation():
        row.locator("button[type=submit]").click()
    saved = SavedProfile.objects.get(name="fleet best")
    assert f"profiles=saved%3A{saved.pk}" in page.url
    expect(page.locator(f'th[data-profile="saved:{saved.pk}"]')).to_have_text("fleet best")
