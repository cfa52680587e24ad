"""A search hit lands on its message in a real browser (issue 26): the call opens scrolled to
the message, the searched words are highlighted (CSS Custom Highlight API over text nodes),
and transcript text stays text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ctxsim.transcripts.search import index_sessions
from ctxsim.transcripts.store import save_sessions
from tests.web.test_search_landing import transcript

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = 40
TARGET = 2 * 25 + 3  # the tool result of call 25
HOSTILE = "<img src=x onerror=\"window.__pwned = true\">"
LONG = ("ok line\n" * 190 + f"TimeDelta {HOSTILE} serialization rounds wrongly\n"
        + "ok line\n" * 40)


@pytest.fixture
def session(personas):
    rows = save_sessions([transcript(TOOLS, 25, LONG, "result {n}\n" * 30)], team=personas.team,
                         user=personas.users["owner"])
    index_sessions(rows)
    return rows[0]


def highlighted(page) -> list[str]:
    return page.evaluate(
        "() => { const h = CSS.highlights.get('search-terms');"
        " return h ? [...h].map(r => r.toString()) : []; }")


def test_a_hit_opens_the_call_at_its_message_with_the_words_highlighted(personas, live_server,
                                                                         login, session):
    page = login("viewer")
    page.goto(f"{live_server.url}/search/")
    page.fill("#search-q", "serialization timedelta")
    page.click(".search-form button[type=submit]")
    hit = page.locator(".search-hit a").first
    expect(hit).to_have_text("marshmallow")
    expect(page.locator(".search-hit mark")).to_have_text(["TimeDelta", "serialization"])
    hit.click()
    expect(page.locator("html")).to_have_attribute("data-landing", "ready")

    target = page.locator(f'#call-view li.msg[data-origin="{TARGET}"]')
    expect(target).to_be_in_viewport()
    assert "landed" in (target.get_attribute("class") or "")
    assert page.evaluate("window.scrollY") > 0, "the call view starts below the first screen"
    assert highlighted(page) == ["TimeDelta", "serialization"]
    # Every painted range lies inside the landed message's text, and that text stays text.
    inside = page.evaluate(
        "(origin) => [...CSS.highlights.get('search-terms')].every(r =>"
        " r.startContainer.parentElement.closest(`li.msg[data-origin='${origin}']`))", TARGET)
    assert inside
    expect(target.locator("pre.body")).to_contain_text(f"TimeDelta {HOSTILE} serialization")
    assert target.locator("img").count() == 0
    assert page.evaluate("window.__pwned === undefined")


def test_find_in_call_highlights_its_words_after_the_swap(personas, live_server, login, session):
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{session.pk}/?call={TOOLS}")
    expect(page.locator("html")).to_have_attribute("data-landing", "ready")
    assert highlighted(page) == []
    page.fill(".call-filter input[name=q]", "wrongly ROUNDS")
    page.locator(".call-filter button[type=submit]").click()
    expect(page.locator("#call-view li.msg")).to_have_count(1)
    expect(page.locator(".call-filter .muted")).to_have_text(f"1 of {2 + 2 * TOOLS} messages")
    expect(page.locator("#call-view")).to_have_attribute("data-highlighted", "2")
    assert highlighted(page) == ["rounds", "wrongly"]  # shown as far as the words


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two `rgb(r, g, b)` colours."""
    def luminance(rgb: str) -> float:
        channels = [int(v) / 255 for v in rgb[rgb.index("(") + 1:-1].split(",")[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_highlighted_words_read_in_both_colour_schemes(personas, live_server, login, session,
                                                      scheme):
    page = login("viewer")
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{live_server.url}/sessions/{session.pk}/?call=26&at={TARGET}&hl=wrongly")
    expect(page.locator("#call-view")).to_have_attribute("data-highlighted", "1")
    background, ink, body = page.evaluate(
        "(origin) => { const el = document.querySelector(`li.msg[data-origin='${origin}'] pre`);"
        " const s = getComputedStyle(el, '::highlight(search-terms)');"
        " return [s.backgroundColor, s.color, getComputedStyle(el).backgroundColor]; }", TARGET)
    assert contrast(background, ink) >= 4.5
    assert background != body  # the words stand out from the text around them
