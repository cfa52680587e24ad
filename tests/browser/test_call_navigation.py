"""Finding one's way in a long call, in a real browser (issue 19)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def generated(personas):
    return save_sessions([generate_session(30, seed=11, oversize_every=3)], team=personas.team)[0]


def test_filter_jump_and_show_all_work_in_place(personas, live_server, login, generated):
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=chatcli&call=20")
    page.evaluate("window.__same_page = true")
    everything = page.locator("#call-view li.msg").count()

    page.select_option(".call-filter select[name=show]", "changed")
    expect(page.locator("#call-view li.msg.status-unchanged")).to_have_count(0)
    assert 0 < page.locator("#call-view li.msg").count() < everything
    assert "show=changed" in page.url
    page.locator("#next-call").click()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "21")
    expect(page.locator("#call-view li.msg.status-unchanged")).to_have_count(0)
    page.locator(".clear-filter").click()
    expect(page.locator("#call-view li.msg.status-unchanged").first).to_be_visible()

    rewritten = page.locator("#call-view li.msg.status-rewritten")
    jump = page.locator("#call-view a.next-status[data-status=rewritten]")
    jump.click()
    expect(page.locator("#call-view li.msg.current")).to_have_attribute(
        "id", rewritten.nth(0).get_attribute("id"))
    jump.click()
    expect(page.locator("#call-view li.msg.current")).to_have_attribute(
        "id", rewritten.nth(1).get_attribute("id"))

    toggle = page.locator("#call-view a.show-all").first
    body_id = toggle.get_attribute("id").replace("toggle-", "body-")
    toggle.click()
    expect(page.locator(f"#{body_id}.full")).to_have_count(1)
    expect(page.locator(f"#{body_id.replace('body-', 'toggle-')}")).to_have_text("show less")
    page.locator(f"#{body_id.replace('body-', 'toggle-')}").click()
    expect(page.locator(f"#{body_id}.full")).to_have_count(0)
    expect(page.locator(f"#{body_id.replace('body-', 'toggle-')}")).to_have_text("show all")

    page.fill(".go-to-call input[name=call]", "7")
    page.locator(".go-to-call button").click()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "7")
    assert page.evaluate("window.__same_page") is True
