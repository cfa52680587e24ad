"""The session page's state (profile, stages, thresholds, call) survives every control, and an
untouched optional field changes nothing (issue 19, acceptance 1)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def generated(personas):
    return save_sessions([generate_session(30, seed=11, oversize_every=3)], team=personas.team)[0]


def peak(page) -> int:
    text = page.locator(".figures div").first.locator("strong").inner_text()
    return int(text.replace(",", ""))


def replay_swapped(page, change) -> None:
    """Run `change` and wait until the replay region has been replaced in place."""
    page.evaluate("document.getElementById('replay').dataset.old = '1'")
    change()
    expect(page.locator("#replay[data-old]")).to_have_count(0)
    expect(page.locator("#replay")).to_have_count(1)


@pytest.mark.parametrize(("profile", "field", "default"), [
    ("chatcli", "#env-CHATCLI_TOOL_RESULT_MAX_CHARS", "20000"),
    ("anthropic-clear-tool-uses", "#f-trigger-value", "100000"),
])
def test_typing_the_default_into_a_threshold_injects_nothing_and_keeps_the_peak(
    personas, live_server, login, generated, profile, field, default
):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile={profile}&call=20")
    before = peak(page)
    saved_before = page.locator(".figures div").nth(2).locator("strong").inner_text()

    def type_default():
        page.fill(field, default)
        page.locator(field).dispatch_event("change")

    replay_swapped(page, type_default)
    assert peak(page) == before
    assert page.locator(".figures div").nth(2).locator("strong").inner_text() == saved_before
    expect(page.locator("#call-view .badge.status-injected")).to_have_count(0)
    assert "anchor_text" not in page.url


def test_toggling_a_stage_keeps_thresholds_and_call_and_the_links_follow_the_state(
    personas, live_server, login, generated
):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=chatcli&call=20")
    field = "#env-CHATCLI_TOOL_RESULT_MAX_CHARS"

    def type_limit():
        page.fill(field, "2500")
        page.locator(field).dispatch_event("change")

    replay_swapped(page, type_limit)
    # Links edited in place carry the new value.
    for link in ("#insights-link", "#export-link", "#compare-link", "#trace-link a.button"):
        assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in page.locator(link).get_attribute("href")
    limited_peak = peak(page)

    page.locator(".stages-details > summary").click()  # the stages card opens on demand
    with page.expect_navigation():
        page.locator("#stage-microcompact").uncheck()
    expect(page.locator(field)).to_have_value("2500")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "20")
    expect(page.locator("#stage-microcompact")).not_to_be_checked()
    assert "call=20" in page.url and "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in page.url
    stage_peak = peak(page)
    assert stage_peak >= limited_peak  # microcompact off can only send more

    # Stepping to another call in place, then switching profile, keeps the call.
    page.locator("#next-call").click()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "21")
    assert "call=21" in page.locator("#compare-link").get_attribute("href")
    with page.expect_navigation():
        page.select_option("#profile-select", "aivax")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "21")
    page.go_back()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "21")
    # Back on a URL htmx pushed shows the whole page, not the fragment the browser cached.
    expect(page.locator("#settings")).to_have_count(1)

    # Compare starts from the current state (not `a=chatcli` with its defaults).
    page.locator("#compare-link").click()
    expect(page.locator("#compare-calls h2")).to_contain_text("Call 21")
    first = page.locator(".compare-grid .card").first
    assert int(first.locator(".figures strong").first.inner_text().replace(",", "")) == stage_peak
    expect(first.locator("h2")).to_contain_text("changed")
    page.go_back()

    # Insights opens with the current state: its column links back to the same settings.
    page.locator("#insights-link").click()
    expect(page).to_have_url(re.compile(r"/insights/"))
    back = page.locator(".insight-col h2 a").first.get_attribute("href")
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in back and "microcompact" not in back.split(
        "stages=")[-1].split("&")[0]
