"""Layout in a real browser: phones (390 px) never scroll sideways, dark mode follows the
system setting, and Back/Forward on a session page redraws its chart (issue 19)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.factories import first_spill, password_for, spill_args

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}


def log_in(context, live_server, username="owner"):
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password_for(username))
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def sideways_overflow(page) -> int:
    """How many CSS pixels the page is wider than the viewport (0 = no sideways scrolling)."""
    return page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def test_no_page_scrolls_sideways_at_390_px(browser, live_server, personas, generated):
    context = browser.new_context(viewport=PHONE)
    login_page = context.new_page()
    login_page.goto(f"{live_server.url}/login/")
    assert sideways_overflow(login_page) <= 0, "login"
    page = log_in(context, live_server)
    session = generated.pk
    page.goto(f"{live_server.url}{reverse('session-detail', args=[session])}"
              "?profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=3000&call=12")
    page.wait_for_load_state("networkidle")
    spill = first_spill(session)
    urls = {
        "sessions": reverse("home"),
        "upload": reverse("upload"),
        "session": reverse("session-detail", args=[session]) + "?call=12",
        "compare": reverse("session-compare", args=[session]),
        "export": reverse("profile-export", args=[session]),
        "insights": reverse("session-insights", args=[session]),
        "sweeps": reverse("session-sweeps", args=[session]),
        "teams": reverse("team-list"),
        "members": reverse("team-members", args=[personas.team.slug]),
    }
    if spill is not None:
        urls["spill"] = reverse("spill-view", args=spill_args(session, spill))
    for name, url in urls.items():
        page.goto(live_server.url + url)
        page.wait_for_load_state("networkidle")
        assert sideways_overflow(page) <= 0, f"{name} ({url}) scrolls sideways"
    context.close()


def test_dark_mode_follows_the_system_setting(browser, live_server, personas):
    colors = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        page = log_in(context, live_server)
        colors[scheme] = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.body).color]"
        )
        context.close()
    assert colors["light"][0] == "rgb(246, 247, 249)"
    assert colors["dark"][0] == "rgb(16, 19, 26)"
    assert colors["dark"][1] != colors["light"][1]


def test_back_and_forward_redraw_the_chart_without_errors(browser, live_server, personas,
                                                         generated):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = log_in(context, live_server)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live_server.url}{reverse('session-detail', args=[generated.pk])}?call=3")
    page.wait_for_load_state("networkidle")
    view = page.locator("#call-view")
    page.keyboard.press("j")
    expect(view).to_have_attribute("data-call", "4")
    page.keyboard.press("j")
    expect(view).to_have_attribute("data-call", "5")
    for move, call in ((page.go_back, "4"), (page.go_forward, "5"), (page.go_back, "4")):
        move()
        expect(view).to_have_attribute("data-call", call)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("() => !!Chart.getChart(document.getElementById('tokens-chart'))")
    assert not [e for e in errors if "Canvas is already in use" in e], errors
    context.close()
