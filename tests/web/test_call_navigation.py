"""Reading one long call: filter, search, jump to the next rewritten/spilled message, badges
that link to what they count, go to call N, "show all" and back (issue 19)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ctxsim.generator import generate_session
from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_session(personas):
    session = generate_session(24, seed=5, oversize_every=4)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def call_page(personas, row, query: str, **headers) -> str:
    url = reverse("session-detail", args=[row.pk]) + "?" + query
    response = personas.client("viewer").get(url, headers=headers)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def rows(html: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in re.finditer(
        r'<li class="msg status-(?P<status>\w+) role-(?P<role>\w+)" id="(?P<id>msg-\d+-\d+)"'
        r'[^>]*data-tools="(?P<tools>[^"]*)"', html)]


def every_row(personas, html: str) -> list[dict[str, str]]:
    """The call view's rows with those of its folds (issue 21: unchanged runs are folded),
    loaded as the fold links load them, in row order."""
    found = rows(html)
    for url in re.findall(r'<li class="fold"[^>]*><a class="unfold" href="([^"]+)"', html):
        found += rows(personas.client("viewer").get(
            url.replace("&amp;", "&"), headers={"HX-Request": "true"}).content.decode())
    return sorted(found, key=lambda r: int(r["id"].rsplit("-", 1)[1]))


def test_changed_only_shows_every_message_a_stage_touched_and_nothing_else(
    personas, long_session
):
    everything = every_row(personas, call_page(personas, long_session,
                                               "profile=chatcli&call=20"))
    changed = rows(call_page(personas, long_session, "profile=chatcli&call=20&show=changed"))
    assert changed and len(changed) < len(everything)
    assert [r["id"] for r in changed] == [r["id"] for r in everything
                                          if r["status"] != "unchanged"]


def test_a_role_and_a_tool_filter_keep_only_those_messages(personas, long_session):
    html = call_page(personas, long_session, "profile=chatcli&call=20")
    tools = sorted({t for r in rows(html) for t in r["tools"].split()})
    assert tools
    by_role = rows(call_page(personas, long_session, "profile=chatcli&call=20&role=tool"))
    assert by_role and {r["role"] for r in by_role} == {"tool"}
    by_tool = rows(call_page(personas, long_session,
                             f"profile=chatcli&call=20&tool={tools[0]}"))
    assert by_tool and all(tools[0] in r["tools"].split() for r in by_tool)
    # The filter offers the call's own tools.
    assert f'<option value="{tools[0]}"' in html


def test_search_finds_text_beyond_the_collapsed_part_of_a_message(personas):
    needle = "needle-in-the-haystack"
    long_text = "x" * 5000 + needle
    session = Session(format="openai-chat", title="search", messages=(
        Message.of("user", "first question"),
        Message.of("assistant", "", tool_calls=[ToolCall("c1", "read_file", '{"p": 1}')]),
        Message.of("tool", long_text, tool_call_id="c1"),
        Message.of("assistant", "done"),
        Message.of("user", "second question"),
    ))
    row = save_sessions([session], team=personas.team)[0]
    html = call_page(personas, row, f"profile=none&call=1&q={needle.upper()}")
    found = rows(html)
    assert [r["role"] for r in found] == ["tool"]
    assert "1 of 3 messages" in html
    none = call_page(personas, row, "profile=none&call=1&q=nowhere-at-all")
    assert rows(none) == [] and "No message of this call matches" in none


def test_a_filter_travels_with_the_stepper_and_the_partial(personas, long_session):
    html = call_page(personas, long_session, "profile=chatcli&call=20&show=changed",
                     **{"HX-Request": "true", "HX-Target": "div#call-view"})
    assert html.lstrip().startswith('<div id="call-view"')
    following = html.split('id="next-call"')[1].split('href="')[1].split('"')[0]
    assert "show=changed" in following and "call=21" in following
    # Links elsewhere on the page keep the replay state only, and an unfiltered view is one
    # click away.
    assert 'class="clear-filter"' in html


def test_a_filtered_url_is_not_redirected_away(personas, long_session):
    url = reverse("session-detail", args=[long_session.pk]) + "?profile=chatcli&show=changed"
    assert personas.client("viewer").get(url).status_code == 200


def test_badges_and_next_links_point_at_the_messages_they_count(personas, long_session):
    html = call_page(personas, long_session, "profile=chatcli&call=20")
    by_id = {r["id"]: r for r in rows(html)}
    badge = re.search(r'<a class="badge status-spilled" href="#(msg-\d+-\d+)"', html)
    assert badge and by_id[badge.group(1)]["status"] == "spilled"
    jump = re.search(r'<a class="next-status" data-status="spilled" href="#(msg-\d+-\d+)"',
                     html)
    assert jump and by_id[jump.group(1)]["status"] == "spilled"


def test_go_to_call_is_a_form_that_works_without_javascript(personas, long_session):
    html = call_page(personas, long_session, "profile=chatcli&call=20")
    form = html.split('class="go-to-call"')[1].split("</form>")[0]
    assert 'name="call"' in form and 'type="number"' in form
    assert 'name="profile" value="chatcli"' in form


def test_show_all_toggles_back_to_the_collapsed_text(personas, long_session):
    html = call_page(personas, long_session, "profile=chatcli&call=20")
    link = re.search(r'<a class="show-all" id="(toggle-\d+-\d+)" href="([^"]+)"', html)
    assert link
    url = link.group(2).replace("&amp;", "&")
    client = personas.client("viewer")
    full = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'class="body full"' in full
    back = re.search(rf'<a class="show-all" id="{link.group(1)}" href="([^"]+)"[^>]*'
                     r'hx-swap-oob="true"[^>]*>show less</a>', full)
    assert back
    collapsed = client.get(back.group(1).replace("&amp;", "&"),
                           headers={"HX-Request": "true"}).content.decode()
    assert 'class="body full"' not in collapsed and "more bytes" in collapsed
    assert f'id="{link.group(1)}"' in collapsed and ">show all</a>" in collapsed


def test_a_call_step_never_builds_the_chart_the_full_page_builds_once(personas, long_session,
                                                                    monkeypatch):
    """Issue 31: every step built the chart's points (all calls) that its partial never shows."""
    from ctxsim.replays import run_figures

    built = []
    real = run_figures.chart_data
    monkeypatch.setattr(run_figures, "chart_data", lambda *a, **k: built.append(1) or real(*a, **k))
    call_page(personas, long_session, "profile=chatcli&call=3", **{"HX-Request": "true",
                                                    "HX-Target": "div#call-view"})
    assert built == []
    html = call_page(personas, long_session, "profile=chatcli&call=4")
    assert built == [1] and 'id="chart-data"' in html
