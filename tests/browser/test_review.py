"""Team review in a real browser: comment on a message, follow its permalink, reply, resolve;
a viewer reads the thread but gets no form."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def switch_user(page, login, name: str):
    page.context.clear_cookies()
    return login(name)


def test_comment_permalink_reply_and_resolve_across_two_users_and_a_viewer(
    personas, live_server, login, stored
):
    errors: list[str] = []
    page = login("reviewer")
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/sessions/{stored.pk}/?call=1")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "1")

    # The reviewer comments on one message (the spilled tool result, message 3).
    message = page.locator('li.msg[data-origin="3"]')
    message.locator("a.comment-toggle").click()  # loads the form in place
    message.locator("textarea[name=body]").fill("Why is the build log spilled?\n<b>really</b>")
    page.evaluate("window.__same_page = true")
    message.locator("form.new-comment button[type=submit]").click()
    comment = message.locator("article.comment").first
    expect(comment).to_contain_text("Why is the build log spilled?")
    assert page.evaluate("window.__same_page") is True  # swapped in place by htmx
    expect(comment.locator(".comment-body")).to_contain_text("<b>really</b>")  # shown as text
    expect(page.locator("#activity")).to_contain_text("commented")
    permalink = comment.locator("a.permalink").get_attribute("href")
    comment_id = comment.get_attribute("id")
    assert re.fullmatch(r"comment-\d+", comment_id)

    # The owner opens the permalink: the session at that call, scrolled to the comment.
    page = switch_user(page, login, "owner")
    page.goto(f"{live_server.url}{permalink}")
    expect(page.locator("#call-view")).to_have_attribute("data-call", "1")
    assert page.url.endswith(f"#{comment_id}")
    target = page.locator(f"#{comment_id}")
    expect(target).to_have_class(re.compile(r"\btarget\b"))
    expect(target).to_be_in_viewport()

    thread = page.locator(".thread", has=target)
    thread.locator("details.reply-box > summary").click()
    thread.locator("details.reply-box textarea[name=body]").fill("Because it is over the cap.")
    thread.locator("details.reply-box button[type=submit]").click()
    thread = page.locator(".thread", has=page.locator(f"#{comment_id}"))
    expect(thread.locator(".reply")).to_contain_text("Because it is over the cap.")
    thread.locator("button.resolve").click()
    thread = page.locator(".thread", has=page.locator(f"#{comment_id}"))
    expect(thread).to_have_class(re.compile(r"\bresolved\b"))
    expect(thread).to_contain_text("Resolved by owner")
    expect(thread.locator("button.resolve")).to_have_text("Reopen")
    expect(page.locator("#activity")).to_contain_text("resolved a thread")

    # The viewer sees the whole thread, with no form anywhere in it.
    page = switch_user(page, login, "viewer")
    page.goto(f"{live_server.url}{permalink}")
    block = page.locator('li.msg[data-origin="3"] .thread-block')
    expect(block).to_contain_text("Why is the build log spilled?")
    expect(block).to_contain_text("Because it is over the cap.")
    expect(block).to_contain_text("Resolved by owner")
    assert block.locator("form, textarea, button").count() == 0
    assert page.locator("#review-bar form").count() == 0
    assert page.locator("textarea").count() == 0
    assert not errors, errors


def test_changing_the_review_status_updates_the_bar_and_the_activity_in_place(
    personas, live_server, login, stored
):
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{stored.pk}/")
    page.evaluate("window.__same_page = true")
    page.select_option("#review-status-select", "approved")
    page.locator("#review-bar button[type=submit]").click()
    expect(page.locator("#review-bar .badge")).to_have_text("Approved")
    expect(page.locator("#review-bar")).to_contain_text("set by reviewer")
    expect(page.locator("#activity")).to_contain_text("Open → Approved")
    assert page.evaluate("window.__same_page") is True


def test_the_chart_marks_calls_with_comments(personas, live_server, login, stored):
    from ctxsim.reviews import services

    services.add_comment(stored, personas.users["owner"], "look", call_index=1)
    page = login("viewer")
    page.goto(f"{live_server.url}/sessions/{stored.pk}/?call=0")
    expect(page.locator("#tokens-chart")).to_have_attribute("data-ready", "1")
    marked = page.evaluate(
        """() => { const c = Chart.getChart('tokens-chart');
                   const d = c.data.datasets.find(s => s.label === 'comments');
                   return d.data.map(v => v !== null); }"""
    )
    assert marked == [False, True]
