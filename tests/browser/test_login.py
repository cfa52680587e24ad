"""A new user logs in through the real form and lands on the home page (the sessions list)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_member_logs_in_through_the_form_and_sees_the_home_page(personas, live_server, page):
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(f"{live_server.url}/login/?next=/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "owner-pass-123")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Sessions")
    expect(page.locator(".team-switcher summary")).to_contain_text("Alpha")


def test_a_wrong_password_keeps_the_user_on_the_login_page(personas, live_server, page):
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    expect(page.locator("[role=alert]")).to_contain_text("didn't match")
