"""Issue 28 item 4, its last part: a deep call view of a long session (a cold `?call=N`, a
fold's rows, a message's whole body, a filtered call) is replayed by the worker, never by the
request; the worker's result renders exactly as the inline path renders the same call. While
it runs, the fragment polls the one job poll (`GET /jobs/<pk>/`, issue 30), which then loads
the fragment's region from its own address."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.core.cache import cache as django_cache
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from ctxsim.jobs.models import Status
from ctxsim.pipeline.profiles import default_profile_for
from ctxsim.replays import call_view, deep_calls, services
from ctxsim.replays.cache import REPLAYS
from ctxsim.replays.models import CallReplay
from ctxsim.replays.state import settings_from_query

pytestmark = pytest.mark.django_db

QUERY = "profile=chatcli"
CALL_VIEW = {"HX-Request": "true", "HX-Target": "div#call-view"}
PENDING = {"HX-Request": "true", "HX-Target": "section#call-pending"}
HX = {"HX-Request": "true"}


def replay_settings(session):
    return settings_from_query(QueryDict(QUERY), session.team,
                               default_profile_for(session.format), session=session)[0]


@pytest.fixture
def deep(settings, long_session):
    """The 24-call session counts as long, its summary is stored, and this process holds no
    replay of it (another process made the summary)."""
    services.summary_for(long_session, replay_settings(long_session))
    settings.CTXSIM_INLINE_REPLAY_CALLS = long_session.model_call_count - 1
    fresh_process()
    return long_session


def fresh_process() -> None:
    """As if the next request reached another web process (the default cache is per process)."""
    REPLAYS.clear()
    django_cache.clear()


@pytest.fixture
def replayed(monkeypatch):
    """Every replay of a call and every new replay this process runs, by entry point."""
    seen: list[str] = []
    detail, new_replay, worker_replay = services.call_detail, services.replay, deep_calls.replay

    def counted(name, real):
        def run(*args, **kwargs):
            seen.append(name)
            return real(*args, **kwargs)
        return run

    monkeypatch.setattr(services, "call_detail", counted("call_detail", detail))
    monkeypatch.setattr(services, "replay", counted("replay", new_replay))
    monkeypatch.setattr(deep_calls, "replay", counted("replay", worker_replay))
    return seen


def page(session, extra: str = "") -> str:
    return reverse("session-detail", args=[session.pk]) + f"?{QUERY}{extra}"


def run_worker() -> int:
    """What the worker does with the queued call replays, in this process (letting its
    replays go after each task, as the task does); how many ran."""
    tasks = list(DBTaskResult.objects.filter(status="READY", task_path__endswith="replay_call"))
    for task in tasks:
        deep_calls.run_call_replay(*task.args_kwargs["args"])
        REPLAYS.forget_replays()
        DBTaskResult.objects.filter(pk=task.pk).update(status="SUCCESSFUL")
    return len(tasks)


def poll_of(html: str) -> tuple[str, CallReplay]:
    """The poll a pending fragment stands for (the call's job, never the fragment's own URL)
    and its job."""
    found = re.search(r'hx-get="(/jobs/(\d+)/\?page=[^"]+)" hx-trigger="every 1s"', html)
    assert found is not None, html
    assert len(re.findall(r'hx-get="', html)) == 1  # nothing else polls
    return found.group(1).replace("&amp;", "&"), CallReplay.objects.get(pk=found.group(2))


def loaded_by(client, poll: str, polling_page: str) -> str:
    """What the ended poll loads into its region (`closest .job-region`), asked from
    `polling_page` as htmx asks."""
    response = client.get(poll, headers={**HX,
                                         "HX-Current-URL": f"http://testserver{polling_page}"})
    found = re.search(r'hx-get="([^"]+)" hx-trigger="load" hx-target="closest \.job-region"',
                      response.content.decode())
    assert response.status_code == 200 and found is not None, response.content
    return found.group(1).replace("&amp;", "&")


def inline(settings, session, client, url: str, headers: dict) -> str:
    """The same URL rendered by a request that replays inline (a short bound)."""
    bound = settings.CTXSIM_INLINE_REPLAY_CALLS
    settings.CTXSIM_INLINE_REPLAY_CALLS = 1000
    CallReplay.objects.all().delete()
    fresh_process()
    try:
        return client.get(url, headers=headers).content.decode()
    finally:
        settings.CTXSIM_INLINE_REPLAY_CALLS = bound
        fresh_process()


def test_a_cold_jump_to_a_deep_call_is_replayed_by_the_worker_and_renders_as_inline(
        personas, deep, replayed, settings):
    client = personas.client("viewer")
    response = client.get(page(deep, "&call=12"))
    html = response.content.decode()
    assert response.status_code == 202
    assert "Replaying to call 12 in the background" in html and "0 of 13 calls" in html
    assert 'id="call-pending"' in html and "job-region" in html
    assert replayed == []  # nothing replayed on the request thread
    (row,) = CallReplay.objects.all()
    poll, polled = poll_of(html)
    assert polled == row and row.kind == "call"
    waiting = client.get(poll, headers=HX)
    assert waiting.status_code == 200 and len(waiting.content) <= 1024, len(waiting.content)
    assert b"0 of 13 calls" in waiting.content
    assert f'hx-get="{poll.replace("&", "&amp;")}" hx-trigger="every 1s"' in waiting.text  # kept
    assert row.status == Status.QUEUED and row.call == 12 and row.total == 13
    (task,) = DBTaskResult.objects.all()
    assert task.queue_name == "replays" and task.args_kwargs["args"] == [row.pk]
    # Another reviewer, and the poll, join it.
    assert personas.client("reviewer").get(page(deep, "&call=12")).status_code == 202
    assert client.get(page(deep, "&call=12"), headers=PENDING).status_code == 200
    assert CallReplay.objects.count() == 1 and DBTaskResult.objects.count() == 1

    assert run_worker() == 1
    row.refresh_from_db()
    assert row.status == Status.DONE and row.done == 13 and row.result
    fresh_process()
    replayed.clear()
    # The ended poll loads the region from the page's own address: the page reloads.
    assert loaded_by(client, poll, page(deep, "&call=12")) == page(deep, "&call=12")
    assert replayed == []
    reload = client.get(page(deep, "&call=12"), headers=PENDING)
    assert reload.status_code == 200 and reload["HX-Refresh"] == "true"
    deep_html = client.get(page(deep, "&call=12"), headers=CALL_VIEW).content.decode()
    assert replayed == [] and 'id="call-view"' in deep_html and "Call 12" in deep_html
    assert deep_html == inline(settings, deep, client, page(deep, "&call=12"), CALL_VIEW)


def queued_calls() -> set[int]:
    return set(CallReplay.objects.filter(status=Status.QUEUED).values_list("call", flat=True))


def packs_queued() -> int:
    """How many call packs are queued (asked ahead of a step: nothing else here asks one)."""
    return CallReplay.objects.filter(part=deep_calls.PACK_TEXT, status=Status.QUEUED).count()


def test_the_worker_makes_the_calls_around_it_so_stepping_on_stays_instant(
        personas, deep, replayed):
    client = personas.client("viewer")
    client.get(page(deep, "&call=12"), headers=CALL_VIEW)
    run_worker()
    fresh_process()
    replayed.clear()
    around = range(12 - deep_calls.BEFORE, 12 + deep_calls.AFTER + 1)
    assert set(CallReplay.objects.values_list("call", "status")) == {
        (c, Status.DONE) for c in around}
    for call in (13, 14, 15):
        step = client.get(page(deep, f"&call={call}"), headers=CALL_VIEW).content.decode()
        assert f'data-call="{call}"' in step and "in the background" not in step
    assert replayed == []
    # The first step asks the worker for the calls past what was made within AHEAD, once: a
    # job lies beyond the first missing call, so the calls it makes around itself begin there
    # (the session's calls are 0-23); so does a read near the first call made.
    after, before = around[-1] + 1, around[0] - 1
    assert after <= 13 + deep_calls.AHEAD < 23
    assert queued_calls() == {min(23, after + deep_calls.BEFORE)}
    client.get(page(deep, f"&call={before + 1}"), headers=CALL_VIEW)
    assert queued_calls() == {min(23, after + deep_calls.BEFORE),
                              max(0, before - deep_calls.AFTER)} == {23, 0}
    assert DBTaskResult.objects.count() == 3
    assert run_worker() == 2
    fresh_process()
    replayed.clear()
    for call in (after, 22, before, 3):  # stepping on, either way: made
        ready = client.get(page(deep, f"&call={call}"), headers=CALL_VIEW).content.decode()
        assert f'data-call="{call}"' in ready and "in the background" not in ready
    assert replayed == [] and DBTaskResult.objects.count() == 3


def test_work_asked_ahead_never_takes_the_users_last_pending_task(personas, deep, settings):
    """A step reads a call the worker made; the call after it is asked ahead only while the
    user could still queue one more task of their own."""
    client = personas.client("viewer")
    client.get(page(deep, "&call=5"), headers=CALL_VIEW)
    run_worker()
    settings.CTXSIM_PENDING_PER_USER = 1
    client.get(page(deep, "&call=0"), headers=CALL_VIEW)  # the user's one pending task
    last = 5 + deep_calls.AFTER
    step = client.get(page(deep, f"&call={last}"), headers=CALL_VIEW)
    assert step.status_code == 200 and f'data-call="{last}"' in step.content.decode()
    assert not CallReplay.objects.filter(call=last + 1).exists()


def test_a_fold_of_a_deep_call_is_loaded_by_the_worker(personas, deep, replayed, settings,
                                                      monkeypatch):
    monkeypatch.setattr(call_view, "CARRIED_SHOWN", 0)  # the last call folds, as a long one's
    client = personas.client("viewer")
    client.get(page(deep, "&call=23"), headers=CALL_VIEW)
    run_worker()
    view = client.get(page(deep, "&call=23"), headers=CALL_VIEW).content.decode()
    start, end = re.search(r'id="fold-23-(\d+)" data-from="\d+" data-to="(\d+)"', view).groups()
    rows = (reverse("session-rows", args=[deep.pk])
            + f"?{QUERY}&call=23&from={start}&to={end}")
    fold = {"HX-Request": "true", "HX-Target": f"li#fold-23-{start}"}
    replayed.clear()
    pending = client.get(rows, headers=fold).content.decode()
    assert pending.startswith(f'<li class="fold call-pending job-region" id="fold-23-{start}"')
    assert pending.endswith("</li>") and replayed == []
    poll, _job = poll_of(pending)
    ahead = packs_queued()
    assert run_worker() == 1 + ahead  # the fold's rows, and any calls asked ahead
    fresh_process()
    replayed.clear()
    # Polled from the session page, the fold's poll loads the fold's own rows URL.
    assert loaded_by(client, poll, page(deep, "&call=23")) == rows
    loaded = client.get(rows, headers=fold).content.decode()
    assert replayed == [] and f'id="msg-23-{start}"' in loaded and "call-pending" not in loaded
    assert loaded == inline(settings, deep, client, rows, fold)
    # Without JavaScript: a page of its own that refreshes itself.
    CallReplay.objects.filter(part__contains='"rows"').delete()
    fresh_process()
    alone = client.get(rows)
    assert alone.status_code == 202 and b'http-equiv="refresh"' in alone.content


def test_a_message_body_of_a_deep_call_is_loaded_by_the_worker_once_for_every_view(
        personas, deep, replayed, settings):
    client = personas.client("viewer")
    client.get(page(deep, "&call=20"), headers=CALL_VIEW)
    run_worker()
    view = client.get(page(deep, "&call=20"), headers=CALL_VIEW).content.decode()
    link = re.search(r'class="show-all" id="toggle-20-(\d+)" href="([^"]+)"', view)
    assert link is not None
    position, href = link.group(1), link.group(2).replace("&amp;", "&")
    body = {"HX-Request": "true", "HX-Target": f"pre#body-20-{position}"}
    replayed.clear()
    pending = client.get(href, headers=body).content.decode()
    assert pending.startswith(f'<pre class="body call-pending job-region" id="body-20-{position}"')
    assert pending.endswith("</pre>") and replayed == []
    poll, job = poll_of(pending)
    # "show less" of the same message waits for the same job, and its poll keeps its own URL.
    less_poll, less_job = poll_of(client.get(href + "&part=head", headers=body).content.decode())
    assert less_job == job and less_poll != poll
    ahead = packs_queued()
    assert run_worker() == 1 + ahead  # the body, and any calls asked ahead
    fresh_process()
    replayed.clear()
    assert loaded_by(client, poll, page(deep, "&call=20")) == href
    assert loaded_by(client, less_poll, page(deep, "&call=20")) == href + "&part=head"
    whole = client.get(href, headers=body).content.decode()
    less = client.get(href + "&part=head", headers=body).content.decode()
    assert replayed == [] and DBTaskResult.objects.filter(status="READY").count() == 0
    assert 'class="body full"' in whole and "show less" in whole and "show all" in less
    assert whole == inline(settings, deep, client, href, body)
    assert less == inline(settings, deep, client, href + "&part=head", body)


def test_a_filtered_deep_call_and_show_every_message_render_as_inline(
        personas, deep, replayed, settings):
    client = personas.client("viewer")
    filtered = page(deep, "&call=20&role=tool&q=result")
    asked = 0
    while "in the background" in (html := client.get(filtered, headers=CALL_VIEW)
                                  .content.decode()):
        assert replayed == [] and asked < 4
        asked += run_worker()
        fresh_process()
        replayed.clear()
    assert asked >= 2  # the call pack, then the Find's rows (and the rows the filter shows)
    assert replayed == [] and "show every message" in html
    # "show every message": the call pack the worker made first.
    every = client.get(page(deep, "&call=20"), headers=CALL_VIEW).content.decode()
    assert "in the background" not in every and 'data-call="20"' in every and replayed == []
    assert html == inline(settings, deep, client, filtered, CALL_VIEW)


def test_outsiders_get_404_and_queue_nothing(personas, deep):
    rows = reverse("session-rows", args=[deep.pk]) + f"?{QUERY}&call=20&from=3&to=9"
    body = reverse("session-message", args=[deep.pk]) + f"?{QUERY}&call=20&row=5"
    for url in (page(deep, "&call=12"), rows, body):
        assert personas.client("outsider").get(url).status_code == 404
        assert personas.client("anonymous").get(url).status_code in (302, 404)
    assert not CallReplay.objects.exists() and not DBTaskResult.objects.exists()


def test_outsiders_get_404_on_the_poll_and_it_loads_only_the_calls_own_pages(personas, deep):
    viewer = personas.client("viewer")
    poll, job = poll_of(viewer.get(page(deep, "&call=12")).content.decode())
    assert personas.client("outsider").get(poll, headers=HX).status_code == 404
    assert personas.client("anonymous").get(poll, headers=HX).status_code in (302, 404)
    run_worker()
    own = page(deep, "&call=12")
    # A page of another site, another session or of another kind: the call's own address.
    base = reverse("job-poll", args=[job.pk])
    for other in ("https://evil.example/x", f"//evil.example{reverse('home')}",
                  reverse("session-detail", args=[deep.pk + 1]) + "?call=3",
                  reverse("session-message", args=[deep.pk]) + "?call=12&row=1"):
        assert loaded_by(viewer, f"{base}?{urlencode({'page': other})}", "/") == own
    # Without htmx the ended poll sends the browser to the region's page (checked the same way).
    assert viewer.get(poll)["Location"] == own
    assert viewer.get(f"{base}?page=https://evil.example/")["Location"] == own


def test_a_short_session_still_replays_its_calls_inline(personas, long_session, replayed):
    services.summary_for(long_session, replay_settings(long_session))
    fresh_process()
    response = personas.client("viewer").get(page(long_session, "&call=12"), headers=CALL_VIEW)
    assert response.status_code == 200 and "Call 12" in response.content.decode()
    assert "call_detail" in replayed and "replay" in replayed
    assert not CallReplay.objects.exists() and not DBTaskResult.objects.exists()


def test_a_call_next_to_the_replay_this_process_paused_stays_instant(personas, deep,
                                                                     replayed):
    settings = replay_settings(deep)
    run = services.stored_summary(deep, settings)
    services.call_detail(deep, settings, run, 12)  # an earlier request's step
    replayed.clear()
    step = personas.client("viewer").get(page(deep, "&call=13"), headers=CALL_VIEW)
    assert step.status_code == 200 and 'data-call="13"' in step.content.decode()
    assert "replay" not in replayed  # one step of the paused replay, no new one
    assert not CallReplay.objects.exists() and not DBTaskResult.objects.exists()


def test_a_deep_call_counts_against_the_quotas(personas, deep, settings):
    settings.CTXSIM_PENDING_PER_USER = 1
    client = personas.client("viewer")
    assert client.get(page(deep, "&call=5")).status_code == 202
    refused = client.get(page(deep, "&call=15"))
    assert refused.status_code == 429 and "at most 1 per user" in refused.content.decode()
    assert client.get(page(deep, "&call=5")).status_code == 202  # joining takes none
    assert CallReplay.objects.count() == 1


def test_a_lost_call_replay_is_queued_again_and_a_failed_one_says_why(personas, deep,
                                                                      settings, monkeypatch):
    client = personas.client("viewer")
    client.get(page(deep, "&call=12"))
    long_ago = timezone.now() - timedelta(seconds=settings.CTXSIM_IMPORT_TIMEOUT_SECONDS + 5)
    CallReplay.objects.update(status=Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago)
    client.get(page(deep, "&call=12"), headers=PENDING)
    row = CallReplay.objects.get()
    assert row.status == Status.QUEUED and row.attempts == 1
    assert DBTaskResult.objects.count() == 2

    def broken(*args, **kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(deep_calls, "replay_to_call", broken)
    run_worker()
    row.refresh_from_db()
    assert row.status == Status.FAILED and "the disk is full" in row.message
    body = client.get(page(deep, "&call=12")).content.decode()
    assert "the disk is full" in body and "every 1s" not in body
    # Its poll says so and loads the region, which shows the failure itself (no poll).
    ended = client.get(reverse("job-poll", args=[row.pk]), headers=HX).content.decode()
    assert "the disk is full" in ended and 'hx-trigger="load"' in ended
    # The first attempt's task, were it run after all, finds nothing to do.
    assert deep_calls.run_call_replay(row.pk) == {"status": "skipped"}


def test_a_day_later_the_views_kept_around_the_landing_call_are_still_there(personas, deep):
    """The day-old clean-up deleted the call views the summary replay kept (no user's), so a
    long session opened a day after its import waited for the worker again. They stay while
    their summary is stored; a user's old view, and a kept one whose summary is gone, go."""
    key = replay_settings(deep).key
    long_ago = timezone.now() - timedelta(seconds=deep_calls.KEEP_SECONDS + 60)
    owner = personas.users["owner"]

    def old_row(call: int, key: str = key, user=None) -> CallReplay:
        return CallReplay.objects.create(
            session=deep, key=key, call=call, query=QUERY, part=deep_calls.PACK_TEXT,
            digest=deep_calls.PACK_DIGEST, status=Status.DONE, result=b"x", total=call + 1,
            done=call + 1, user=user, team=deep.team, finished_at=long_ago)

    kept = old_row(20)
    stepped = old_row(19, user=owner)
    orphan = old_row(18, key="0" * 64)  # kept by a summary evicted since
    assert personas.client("viewer").get(page(deep, "&call=5")).status_code == 202
    assert CallReplay.objects.filter(call=5, status=Status.QUEUED).exists()  # it cleaned up
    assert CallReplay.objects.filter(pk=kept.pk).exists()
    assert not CallReplay.objects.filter(pk__in=[stepped.pk, orphan.pk]).exists()
