"""A long session's new replay in a real browser (issue 20 item 4): the page shows the
worker's progress at once, polls, and becomes the session page when the replay is stored."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def long(settings, generated):
    """The 30-call session counts as long: its new replays go to the worker."""
    from ctxsim.replays.cache import REPLAYS

    settings.CTXSIM_INLINE_REPLAY_CALLS = 10
    REPLAYS.clear()
    return generated


def test_the_pending_page_becomes_the_session_page_once_the_worker_stored_it(
        personas, live_server, login, long, worker):
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{long.pk}/?profile=aivax")
    pending = page.locator("#replay-pending")
    expect(pending).to_contain_text("Replaying in the background")
    expect(pending).to_contain_text("of 30 calls")
    expect(page.locator("#tokens-chart")).to_have_count(0)
    worker.start()
    expect(page.locator("#tokens-chart")).to_be_visible(timeout=60_000)
    expect(page.locator("#call-view")).to_be_visible()
    assert "profile=aivax" in page.url
    assert page.evaluate("document.getElementById('tokens-chart').dataset.ready") == "1"


def test_a_new_threshold_shows_the_progress_in_place_then_the_replay(
        personas, live_server, login, long, worker):
    from ctxsim.replays import services

    services.summary_for(long, services.default_settings(long))  # the page opens at once
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{long.pk}/?call=5")
    # A deep call of a long session: the worker replays to it while the page says so, and
    # the page opens on the call once it is stored.
    expect(page.locator("main")).to_contain_text("Replaying to call 5")
    worker.start()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "5", timeout=60_000)
    page.evaluate("window.__same_page = true")
    field = page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS")
    field.fill("2500")
    field.dispatch_event("change")
    expect(page.locator("#replay")).to_contain_text("Replaying in the background")
    expect(page.locator("#tokens-chart")).to_be_visible(timeout=60_000)
    expect(page.locator("#call-view")).to_have_attribute("data-call", "5")
    assert page.evaluate("window.__same_page") is True  # swapped in place, no reload
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in page.url


def test_a_fold_of_a_deep_call_waits_on_the_job_poll_and_opens_in_place(
        personas, live_server, login, long, worker, monkeypatch):
    from ctxsim.replays import call_view, services
    from ctxsim.replays.cache import REPLAYS

    monkeypatch.setattr(call_view, "CARRIED_SHOWN", 0)  # the call folds its carried rows
    services.summary_for(long, services.default_settings(long))
    REPLAYS.forget_replays()  # another process made it: this one holds none of its calls
    page = login("viewer")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{live_server.url}/sessions/{long.pk}/?call=25")
    expect(page.locator("main")).to_contain_text("Replaying to call 25")
    worker.start()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "25", timeout=60_000)
    fold = page.locator("#call-view li.fold").first
    start = fold.get_attribute("data-from")
    page.evaluate("window.__same_page = true")
    asked.clear()
    fold.locator("a.unfold").click()
    # The fold's rows are the worker's too: the fold polls the job, then loads its rows.
    expect(page.locator(f"#msg-25-{start}")).to_be_visible(timeout=60_000)
    expect(page.locator("#call-view .call-pending")).to_have_count(0)
    assert page.evaluate("window.__same_page") is True
    assert any("/jobs/" in url for url in asked), asked
    assert sum("/rows/" in url for url in asked) == 2, asked  # asked, then loaded by the poll
