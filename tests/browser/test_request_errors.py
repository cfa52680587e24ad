"""A failed htmx request shows a banner in place and keeps the view (issue 19)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.transcripts.models import Session as SessionRow
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)


def test_stepping_a_session_deleted_in_another_tab_shows_a_banner_not_an_error_page(
    personas, live_server, login
):
    row = save_sessions([generate_session(12, seed=3)], team=personas.team,
                        user=personas.users["owner"])[0]
    page = login("owner")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?call=2")
    view = page.locator("#call-view")
    expect(view).to_have_attribute("data-call", "2")
    before = view.inner_text()

    other = page.context.new_page()  # the other tab deletes it through the real form
    other.goto(f"{live_server.url}/sessions/{row.pk}/")
    other.click("details.danger summary")
    other.click("button.danger")
    other.wait_for_load_state("networkidle")
    assert not SessionRow.objects.filter(pk=row.pk).exists()

    page.keyboard.press("j")
    banner = page.locator("#request-error")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("This session no longer exists")
    expect(view).to_have_attribute("data-call", "2")
    assert view.inner_text() == before
    assert "Traceback" not in page.content()


def test_a_server_that_is_gone_shows_a_retry_banner(personas, live_server, login):
    row = save_sessions([generate_session(12, seed=3)], team=personas.team,
                        user=personas.users["owner"])[0]
    page = login("owner")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?call=2")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "2")
    page.route("**/sessions/**", lambda route: route.abort("connectionrefused"))
    page.keyboard.press("j")
    banner = page.locator("#request-error")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("could not be reached")
    expect(banner.locator("[data-retry]")).to_be_visible()
    expect(page.locator("#call-view")).to_have_attribute("data-call", "2")
