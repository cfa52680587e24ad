"""The session page in a real browser: htmx swaps, the chart, spills, profiles, compare, XSS."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.store import save_sessions
from tests.factories import UNTRUSTED, spilling_session
from tests.shared import SHARED_DIR, requires_shared

pytestmark = pytest.mark.django_db(transaction=True)


def peak(page) -> int:
    return int(page.locator(".figures div").first.locator("strong").inner_text().replace(",", ""))


def test_changing_a_threshold_updates_chart_and_call_view_without_a_page_load(
    personas, live_server, login, generated
):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=chatcli&call=20")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "20")
    page.evaluate("window.__same_page = true")
    before_peak = peak(page)
    before_sent = page.locator(".call-figures strong").nth(1).inner_text()

    field = page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS")
    field.fill("2500")
    field.dispatch_event("change")
    expect(page.locator("#eff-CHATCLI_TOOL_RESULT_MAX_CHARS")).to_contain_text("effective 2500")
    expect(page.locator(".figures div").first.locator("strong")).not_to_have_text(str(before_peak))

    assert page.evaluate("window.__same_page") is True  # no navigation happened
    assert page.locator(".call-figures strong").nth(1).inner_text() != before_sent
    assert page.locator("#call-view .badge.status-spilled").count() > 0
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=2500" in page.url
    assert page.evaluate("document.getElementById('tokens-chart').dataset.ready") == "1"


def test_an_invalid_value_shows_its_message_and_keeps_the_result(
    personas, live_server, login, generated
):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=aivax")
    before = peak(page)
    page.evaluate("window.__same_page = true")
    field = page.locator("#f-contextMaximumSize")
    field.fill("-5")
    field.dispatch_event("change")
    expect(page.locator("#form-errors")).to_contain_text("contextMaximumSize")
    assert peak(page) == before
    assert page.evaluate("window.__same_page") is True


def test_clicking_the_chart_and_the_keyboard_select_calls(personas, live_server, login, generated):
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=chatcli&call=2")
    page.evaluate("window.__same_page = true")
    point = page.evaluate(
        """() => { const c = Chart.getChart('tokens-chart');
                   const p = c.getDatasetMeta(1).data[9];
                   const r = c.canvas.getBoundingClientRect();
                   return {x: r.left + p.x, y: r.top + p.y}; }"""
    )
    page.mouse.click(point["x"], point["y"])
    expect(page.locator("#call-view")).to_have_attribute("data-call", "9")
    page.keyboard.press("j")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "10")
    page.keyboard.press("k")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "9")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "8")
    assert page.evaluate("window.__same_page") is True
    assert page.url.endswith("call=8")


def test_a_spill_link_opens_the_spilled_file(personas, live_server, login):
    row = save_sessions([spilling_session()], team=personas.team)[0]
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=chatcli&call=1")
    page.get_by_role("link", name="/tmp/chatcli-tool-results/budget_call_1_1.txt").click()
    expect(page.locator("h1")).to_have_text("/tmp/chatcli-tool-results/budget_call_1_1.txt")
    expect(page.locator("#L400")).to_contain_text("line 0400 of a failing build log")


def test_save_a_profile_reload_and_find_it_then_compare(personas, live_server, login, generated):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{generated.pk}/?profile=chatcli")
    page.fill("#env-CHATCLI_TOOL_RESULT_MAX_CHARS", "4000")
    page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS").dispatch_event("change")
    expect(page.locator("#eff-CHATCLI_TOOL_RESULT_MAX_CHARS")).to_contain_text("effective 4000")
    page.fill("#profile-name", "small results")
    page.click("#save-profile button[type=submit]")
    expect(page).to_have_url(re.compile(r"profile=saved%3A\d+"))
    page.reload()
    expect(page.locator("#profile-select option:checked")).to_have_text("small results (team)")
    expect(page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS")).to_have_value("4000")

    page.get_by_role("link", name="Compare profiles").click()
    page.select_option("#side-2", label="small results (team)")
    expect(page.locator(".compare-grid h2").nth(1)).to_have_text("small results")
    assert page.evaluate("document.getElementById('compare-chart').dataset.ready") == "1"
    expect(page.locator("#compare-calls .call-view")).to_have_count(2)


def test_untrusted_transcript_content_never_runs_script(personas, live_server, login):
    messages = [Message.of("system", "set window.__xss if you can")]
    messages += [Message.of("user", text) for text in UNTRUSTED]
    messages += [
        Message.of("assistant", "", tool_calls=[ToolCall("c1", "<img src=x onerror=alert(3)>",
                                                         '{"<script>":"alert(4)"}')]),
        Message.of("tool", "<script>window.__xss = 1; alert(5)</script>" * 200,
                   tool_call_id="c1"),
    ]
    row = save_sessions([Session(format="openai-chat", title="<script>alert(6)</script>",
                                 messages=tuple(messages))], team=personas.team)[0]
    page = login("owner")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=none&call=1")
    expect(page.locator("h1")).to_have_text("<script>alert(6)</script>")
    expect(page.locator("#call-view")).to_contain_text("<img src=x onerror=")
    page.locator(".show-all").first.click()
    expect(page.locator("pre.full")).to_contain_text("window.__xss = 1")
    page.wait_for_timeout(300)
    assert dialogs == []
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#call-view img").count() == 0


@requires_shared
def test_a_real_imported_session_updates_in_place_when_the_per_result_limit_changes(
    personas, live_server, login
):
    from ctxsim.transcripts.imports import import_transcript

    path = SHARED_DIR / "transcripts" / "claude-code-jsonl" / "agentcmd__full-session-four.jsonl"
    row = import_transcript(path, team=personas.team).sessions[0]
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{row.pk}/?profile=chatcli")
    page.evaluate("window.__same_page = true")
    before = peak(page)
    field = page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS")
    field.fill("1000")
    field.dispatch_event("change")
    expect(page.locator("#eff-CHATCLI_TOOL_RESULT_MAX_CHARS")).to_contain_text("effective 1000")
    expect(page.locator(".figures div").first.locator("strong")).not_to_have_text(str(before))
    assert page.evaluate("window.__same_page") is True
    assert page.locator("#call-view .badge.status-spilled").count() > 0
