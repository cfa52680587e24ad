"""What a browser shows of issue 26's fixes: the 405 page, the overview at a phone's width, a JSON
tool output's text with its JSON one click away, the skip link and fewer tab stops before the
call stepper, the sticky stepper of a long call, and the new pieces in dark mode."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "".join(f"{n:6}\tdata line {n}\n" for n in range(1, 3001))


def codex_session() -> Session:
    messages = [Message.of("user", "Read the data files")]
    for n in range(1, 4):
        messages += [
            Message.of("assistant", "", tool_calls=[ToolCall(f"c{n}", "shell", "{}")]),
            Message.of("tool", json.dumps({"output": LONG if n == 1 else f"short {n}\nline two",
                                           "metadata": {"exit_code": 0}}),
                       tool_call_id=f"c{n}")]
    messages.append(Message.of("assistant", "Done."))
    return Session(format="codex", title="json outputs", messages=tuple(messages))


def luminance(css_color: str) -> float:
    parts = css_color[css_color.index("(") + 1:css_color.index(")")].split(",")
    r, g, b = (float(x) for x in parts[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_typing_logout_shows_the_405_page_in_the_layout(personas, login, live_server):
    page = login("owner")
    response = page.goto(f"{live_server.url}/logout/")
    assert response.status == 405
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator(".error-page h1")).to_have_text("Not an address to open")
    expect(page.locator(".error-page")).to_contain_text("“Log out” button")


def test_the_overview_fits_a_390_px_screen(personas, login, live_server, page):
    from tests.web.test_overview import run_queued_figures

    save_sessions([generate_session(10 + i, seed=i, oversize_every=3) for i in range(3)],
                  team=personas.team, user=personas.users["owner"])
    login("viewer")
    page.goto(f"{live_server.url}/overview/?profiles=chatcli&profiles=none&profiles=aivax")
    run_queued_figures()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/overview/?profiles=chatcli&profiles=none&profiles=aivax")
    expect(page.locator(".overview-figures")).to_be_visible()
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > 391).slice(0, 8)
        .map(e => e.tagName + '.' + e.className + ' '
                  + Math.round(e.getBoundingClientRect().right))""")


def test_a_json_tool_output_reads_as_text_with_its_json_one_click_away(personas, login,
                                                                       live_server):
    (row,) = save_sessions([codex_session()], team=personas.team, user=personas.users["owner"])
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=none&call=1")
    body = page.locator("#body-1-2")
    expect(body).to_contain_text("     1\tdata line 1\n     2\tdata line 2")
    expect(body).not_to_contain_text('{"output"')
    json_view = page.locator("#msg-1-2 details.raw")
    expect(json_view.locator("summary")).to_have_text("JSON")
    expect(json_view.locator(".raw-text")).not_to_be_visible()
    json_view.locator("summary").click()
    expect(json_view.locator(".raw-text")).to_be_visible()
    expect(json_view.locator(".raw-text")).to_contain_text('"output": "     1\\tdata line 1')
    page.click("#toggle-1-2")  # show all: the whole output, still as text
    expect(page.locator("#body-1-2")).to_contain_text("  3000\tdata line 3000")
    expect(page.locator("#body-1-2")).not_to_contain_text('"metadata"')


def test_the_skip_link_reaches_the_call_in_few_tab_stops_and_the_stepper_stays(
        personas, login, live_server):
    (row,) = save_sessions([generate_session(40, seed=7, oversize_every=2)],
                           team=personas.team, user=personas.users["owner"])
    page = login("owner")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=chatcli&call=39")
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link", has_text="Skip to the call")
    expect(skip).to_be_focused()
    box = skip.bounding_box()
    assert box and box["x"] >= 0 and box["y"] >= 0  # on screen once focused
    page.keyboard.press("Enter")
    expect(page.locator("#call-view")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#prev-call")).to_be_focused()
    # Without the skip link: the tab stops before the stepper.
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=chatcli&call=39")
    stops = 0
    while stops < 200:
        page.keyboard.press("Tab")
        stops += 1
        if page.evaluate("() => document.activeElement.id") == "prev-call":
            break
    assert stops <= 50, stops  # 98 before the stages card folded away (issue 26)
    # A long call: scrolled to its end, the stepper is still on screen, and the end links back.
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height > 3 * 900
    page.locator(".back-to-top a").scroll_into_view_if_needed()
    stepper = page.locator("#call-view .stepper").bounding_box()
    assert stepper and 0 <= stepper["y"] <= 5
    page.locator(".back-to-top a").click()
    expect(page.locator("#call-view")).to_be_focused()


def test_the_new_pieces_are_dark_in_dark_mode(personas, login, live_server, page):
    (row,) = save_sessions([codex_session()], team=personas.team, user=personas.users["owner"])
    page.emulate_media(color_scheme="dark")
    login("owner")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=codex&call=1"
              "&codex_config=bad+toml+%3D")
    dark = {
        "error line": "#settings .field-error",
        "TOML field": "#f-codex_config",
        "JSON view": "#msg-1-2 details.raw",
        "sticky stepper": "#call-view .stepper",
    }
    for name, selector in dark.items():
        element = page.locator(selector).first
        expect(element).to_be_attached()
        colors = element.evaluate("""e => { let n = e, bg = 'rgba(0, 0, 0, 0)';
            while (n && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
              bg = getComputedStyle(n).backgroundColor; n = n.parentElement; }
            return [bg, getComputedStyle(e).color]; }""")
        assert luminance(colors[0]) < 0.3, (name, colors)
        assert luminance(colors[1]) > 0.4, (name, colors)
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link").first
    colors = skip.evaluate("e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color]")
    assert luminance(colors[0]) < 0.3 and luminance(colors[1]) > 0.4, colors
    page.goto(f"{live_server.url}/logout/")
    card = page.locator(".error-page")
    assert luminance(card.evaluate("e => getComputedStyle(e).backgroundColor")) < 0.3
