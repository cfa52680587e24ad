"""The session page's state (profile, stages, thresholds, call) survives every control, and an
untouched optional field changes nothing (issue 19, acceptance 1)."""

from __future__ import annotations

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

