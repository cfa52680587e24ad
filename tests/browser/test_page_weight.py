"""A long session stays light in the browser (issue 21, acceptance 2): on a generated 2,000-call
session the session page's HTML is under 1 MB and a call step swaps under 300 KB, measured from
the answers' sizes (never by time), and an unchanged run unfolds in place."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ctxsim.generator import generate_session
from ctxsim.replays.services import compute_default_stats
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 2000
PAGE_LIMIT = 1_000_000
STEP_LIMIT = 300_000


@pytest.fixture
def long_2000(personas):
    row = save_sessions([generate_session(CALLS, seed=21)], team=personas.team,
                        user=personas.users["owner"], source_name="long.jsonl")[0]
    compute_default_stats(row)  # what an import does before the session is listed
    return row


def test_a_2000_call_session_page_and_its_call_steps_are_light(personas, live_server, login,
                                                               long_2000, settings):
    # The page's weight, not the worker: every call is replayed here (a step back from the
    # page's call of a session past the bound goes to the worker: tests/web/test_deep_calls.py).
    settings.CTXSIM_INLINE_REPLAY_CALLS = 10_000
    page = login("reviewer")
    response = page.goto(f"{live_server.url}/sessions/{long_2000.pk}/?profile=chatcli")
    assert response.ok
    page_bytes = len(response.body())
    assert page_bytes < PAGE_LIMIT, f"session page {page_bytes:,} bytes"
    call = int(page.locator("#call-view").get_attribute("data-call"))
    assert call > CALLS // 2  # the call that sent the most: a late one, thousands of messages
    sent = page.locator(".call-figures strong").nth(2).inner_text()
    assert int(sent.replace(",", "")) > 3000

    page.evaluate("window.__same_page = true")
    with page.expect_response(lambda r: "call=" in r.url
                              and r.request.headers.get("hx-request") == "true") as step:
        page.click("#prev-call")
    assert step.value.ok
    step_bytes = len(step.value.body())
    assert step_bytes < STEP_LIMIT, f"call step {step_bytes:,} bytes"
    expect(page.locator("#call-view")).to_have_attribute("data-call", str(call - 1))
    assert page.evaluate("window.__same_page") is True

    # An unchanged run is one counted row; it unfolds in place into its messages.
    fold = page.locator("li.fold").first
    start, end = int(fold.get_attribute("data-from")), int(fold.get_attribute("data-to"))
    with page.expect_response(lambda r: "/rows/" in r.url) as rows:
        fold.locator("a.unfold").click()
    assert rows.value.ok
    expect(page.locator(f"#msg-{call - 1}-{start}")).to_be_attached()
    if end - start <= 200:
        expect(page.locator(f"#msg-{call - 1}-{end - 1}")).to_be_attached()
    assert page.evaluate("window.__same_page") is True
