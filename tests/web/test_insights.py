"""The cache & information-loss page and sweeps: numbers, partials, links, permissions."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis.models import Sweep
from ctxsim.pipeline.messages import Session
from ctxsim.transcripts.imports import import_transcript
from ctxsim.transcripts.store import save_sessions
from tests.factories import lost_path_transcript, rereading_transcript
from tests.shared import SHARED_DIR, requires_shared

pytestmark = pytest.mark.django_db

CLEAR_QUERY = ("profile=anthropic-clear-tool-uses&trigger.type=tool_uses&trigger.value=1"
               "&keep.type=tool_uses&keep.value=1&profiles=none")


def store(personas, messages, title="crafted"):
    session = Session(format="openai-chat", title=title, messages=tuple(messages))
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]


def insights_url(row, query=""):
    return reverse("session-insights", args=[row.pk]) + (f"?{query}" if query else "")


def column(html: str, profile: str) -> str:
    start = html.index(f'data-profile="{profile}"')
    return html[start:start + 3000]


def test_the_page_shows_hit_rate_and_cost_for_none_chatcli_and_aivax_by_default(
    personas, long_session
):
    response = personas.client("viewer").get(insights_url(long_session))
    assert response.status_code == 200
    html = response.content.decode()
    for profile in ("none", "chatcli", "aivax"):
        block = column(html, profile)
        assert re.search(r'data-hit-rate="\d+\.\d\d"', block)
        assert re.search(r'class="cost">\$[\d,]+\.(\d{2}|\d{4})<', block)
    assert "Cache breaks" in html and "Information lost" in html
    # Append-only history: after the first call every break-free call reads from the cache.
    assert 'class="breaks">0<' in column(html, "none")


def test_the_htmx_request_gets_only_the_insights_partial(personas, long_session):
    response = personas.client("viewer").get(
        insights_url(long_session, "profiles=chatcli&model=gpt-5&lifetime=10m&price=2"),
        headers={"HX-Request": "true", "HX-Target": "section#insights"},
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="insights"') and "<html" not in body
    assert 'data-profile="chatcli"' in body and 'data-profile="none"' not in body


def test_bad_cache_settings_are_reported_and_fall_back_to_the_table(personas, long_session):
    response = personas.client("viewer").get(
        insights_url(long_session, "profiles=none&model=gpt-5&lifetime=1h&price=abc"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<code>lifetime</code>" in html and "<code>price</code>" in html


def test_the_session_page_settings_get_their_own_column(personas, long_session):
    html = personas.client("viewer").get(insights_url(
        long_session, "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=3000")).content.decode()
    assert "current: chatcli" in html
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=3000" in html  # its links keep the parameters


def test_a_reread_is_listed_with_a_link_to_its_call(personas):
    row = store(personas, rereading_transcript())
    html = personas.client("viewer").get(insights_url(row, CLEAR_QUERY)).content.decode()
    block = html[html.index('<section class="card insight-detail"'):]
    rereads = re.findall(r'<tr class="reread"><td><a href="([^"]+)">(\d+)</a>', block)
    assert len(rereads) == 1
    link, call = rereads[0]
    assert call == "2" and link.startswith(reverse("session-detail", args=[row.pk]))
    assert "profile=anthropic-clear-tool-uses" in link and link.endswith("call=2")


def test_a_lost_reference_is_listed_with_its_identifier(personas):
    row = store(personas, lost_path_transcript())
    html = personas.client("viewer").get(insights_url(row, CLEAR_QUERY)).content.decode()
    assert re.search(r'<tr class="lost-ref">.*?call=2">2</a>.*?<code>build/generated/schema_v2.go'
                     r"</code>", html, re.S)


@requires_shared
def test_a_real_session_shows_every_default_profile_and_none_hits_the_whole_prefix(personas):
    path = SHARED_DIR / "transcripts/claude-code-jsonl/agentcmd__full-session-four.jsonl"
    row = import_transcript(path, team=personas.team).sessions[0]
    html = personas.client("viewer").get(insights_url(row)).content.decode()
    for profile in ("none", "chatcli", "aivax"):
        assert re.search(r'data-hit-rate="\d+\.\d\d"', column(html, profile))
    none = html[html.index('<section class="card insight-detail" id="detail-1"'):]
    none = none[:none.index("</section>")]
    rows = re.findall(r'<tr data-call="(\d+)" class="(\w*)">.*?<td class="num">([\d,]+)</td>'
                      r'<td class="num">([\d,]+)</td>', none, re.S)
    rows = [(i, status, a.replace(",", ""), b.replace(",", "")) for i, status, a, b in rows]
    assert len(rows) > 5
    checked = 0
    for (_, _, prev_input, _), (_, status, _, cached) in zip(rows, rows[1:], strict=False):
        assert status in ("", "expired")  # none never breaks the prefix
        if status == "" and int(prev_input) >= 1024:
            assert cached == prev_input
            checked += 1
    assert checked >= 5


def test_outsiders_get_404_everywhere_and_viewers_cannot_start_a_sweep(personas, long_session):
    outsider = personas.client("outsider")
    urls = [insights_url(long_session), reverse("session-sweeps", args=[long_session.pk])]
    for url in urls:
        assert outsider.get(url).status_code == 404
        assert personas.client("anonymous").get(url).status_code == 302  # to the login page
    create = reverse("sweep-create", args=[long_session.pk])
    form = {"profile": "aivax", "param1": "toolContextCount", "start1": "1", "stop1": "2",
            "step1": "1"}
    assert outsider.post(create, form).status_code == 404
    assert personas.client("viewer").post(create, form).status_code == 403
    sweep = Sweep.objects.create(session=long_session, axes=[], cache={}, status="done")
    detail = reverse("sweep-detail", args=[long_session.pk, sweep.pk])
    assert outsider.get(detail).status_code == 404
    assert personas.client("viewer").get(detail).status_code == 200


def test_a_sweep_post_needs_the_csrf_token(personas, long_session):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.users["owner"])
    response = client.post(reverse("sweep-create", args=[long_session.pk]),
                           {"profile": "aivax", "param1": "toolContextCount"})
    assert response.status_code == 403


def test_the_sweep_form_lists_integer_parameters_including_chatcli_env_knobs(
    personas, long_session
):
    html = personas.client("reviewer").get(
        reverse("session-sweeps", args=[long_session.pk]) + "?profile=chatcli").content.decode()
    assert 'value="env.CHATCLI_TOOL_RESULT_MAX_CHARS"' in html
    assert 'id="sweep-form"' in html


def test_a_bad_range_is_reported_per_field(personas, long_session):
    response = personas.client("owner").post(reverse("sweep-create", args=[long_session.pk]), {
        "profile": "aivax", "param1": "toolContextCount", "start1": "5", "stop1": "1",
        "step1": "x", "param2": "nope", "start2": "1", "stop2": "2", "step2": "1"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "<code>step1</code>" in html and "<code>param2</code>" in html
    assert not Sweep.objects.exists()


def sweep_form(**extra):
    return {"profile": "aivax", "param1": "toolContextCount", "start1": "1", "stop1": "3",
            "step1": "1", "param2": "contextMaximumSize", "start2": "20000", "stop2": "40000",
            "step2": "20000", "model": "gpt-5", "lifetime": "", "price": "", **extra}


def test_a_small_sweep_runs_inline_and_its_points_apply_as_page_parameters(personas, long_session):
    response = personas.client("reviewer").post(reverse("sweep-create", args=[long_session.pk]),
                                                sweep_form())
    sweep = Sweep.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("sweep-detail", args=[long_session.pk, sweep.pk])
    assert sweep.status == "done" and sweep.done == sweep.total == 6
    assert any(p["front"] for p in sweep.points)
    html = personas.client("viewer").get(response["Location"]).content.decode()
    assert 'id="sweep-chart"' in html and 'id="sweep-chart-data"' in html
    assert "every 1s" not in html
    applies = re.findall(r'class="button apply-point" href="([^"]+)"', html)
    assert len(applies) == 6
    first = applies[0].replace("&amp;", "&")
    assert "toolContextCount=1" in first and "contextMaximumSize=20000" in first
    page = personas.client("viewer").get(first, follow=True).content.decode()
    assert 'id="f-toolContextCount" value="1"' in page


# db_worker closes its database connection after a task, which would break PostgreSQL's test
# transaction: this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_a_large_sweep_goes_to_the_worker_and_reports_progress(
    personas, long_session, settings, django_capture_on_commit_callbacks
):
    settings.CTXSIM_INLINE_SWEEP_WORK = 10
    with django_capture_on_commit_callbacks(execute=True):
        response = personas.client("owner").post(reverse("sweep-create", args=[long_session.pk]),
                                                 sweep_form())
    sweep = Sweep.objects.get()
    assert sweep.status == "queued"
    assert DBTaskResult.objects.get().args_kwargs["args"] == [sweep.pk]
    polled = personas.client("viewer").get(
        response["Location"], headers={"HX-Request": "true", "HX-Target": "div#sweep-status"})
    body = polled.content.decode()
    assert body.lstrip().startswith('<div id="sweep-status"') and "<html" not in body
    assert 'hx-trigger="every 1s"' in body and "<progress" in body
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay", "--no-reload",
                 verbosity=0)
    sweep.refresh_from_db()
    assert sweep.status == "done" and sweep.done == 6 and len(sweep.points) == 6
    done = personas.client("viewer").get(
        response["Location"], headers={"HX-Request": "true", "HX-Target": "div#sweep-status"})
    assert "every 1s" not in done.content.decode()
    assert 'id="sweep-chart-data"' in done.content.decode()


def test_the_session_page_links_to_the_insights_page_with_its_settings(personas, long_session):
    html = personas.client("viewer").get(
        reverse("session-detail", args=[long_session.pk]) + "?profile=aivax&call=0"
    ).content.decode()
    assert f'href="{insights_url(long_session)}?profile=aivax' in html


def test_a_sweep_whose_values_change_nothing_says_so_with_labels_and_one_chart_point(
        personas, long_session):
    """issue 26: 12 identical "front" points under internal names, and no word of why."""
    response = personas.client("reviewer").post(
        reverse("sweep-create", args=[long_session.pk]),
        sweep_form(param1="contextMaximumSize", start1="5000000", stop1="5011000",
                   step1="1000", param2="", start2="", stop2="", step2=""))
    assert response.status_code == 302
    html = personas.client("viewer").get(response["Location"]).content.decode()
    assert "These values change nothing here" in html
    assert "every one of the 12 points" in html
    assert "<td>Context maximum size 5,000,000" in html and "<td>contextMaximumSize" not in html
    data = json.loads(re.search(r'id="sweep-chart-data" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    (point,) = data["points"]
    assert point["label"] == ("Context maximum size 5,000,000 and 11 more values with the same "
                              "result")


def test_a_sweep_whose_values_matter_has_no_such_note(personas, long_session):
    response = personas.client("reviewer").post(reverse("sweep-create", args=[long_session.pk]),
                                                sweep_form())
    html = personas.client("viewer").get(response["Location"]).content.decode()
    assert "These values change nothing here" not in html
