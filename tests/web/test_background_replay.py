"""Issue 20 item 4: a long session's new replay goes to the worker, never to a request thread,
and one user cannot hold every thread (the per-user limit holds across processes)."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.core.cache import cache as django_cache
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from ctxsim.jobs.models import Status
from ctxsim.replays import background, deep_calls, limits, page, receivers, services
from ctxsim.replays.cache import REPLAYS
from ctxsim.replays.models import BackgroundReplay, CallReplay, ReplayRun

pytestmark = pytest.mark.django_db

NEW = "env.CHATCLI_TOOL_RESULT_MAX_CHARS=4321"  # thresholds never asked before
REPLAY = {"HX-Request": "true", "HX-Target": "section#replay"}
CALL_VIEW = {"HX-Request": "true", "HX-Target": "div#call-view"}
PENDING = {"HX-Request": "true", "HX-Target": "section#replay-pending"}


@pytest.fixture
def short_bound(settings, long_session):
    """The 24-call session counts as long: past the bound, replays go to the worker."""
    settings.CTXSIM_INLINE_REPLAY_CALLS = long_session.model_call_count - 1
    REPLAYS.clear()
    return long_session


@pytest.fixture
def replays_run(monkeypatch):
    """Counts the replays this process runs (every summary and call replay goes through it)."""
    seen = []
    real = services.replay

    def counted(*args, **kwargs):
        seen.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "replay", counted)
    return seen


def url(row, query: str = "") -> str:
    return reverse("session-detail", args=[row.pk]) + (f"?profile=chatcli&{query}" if query
                                                       else "?profile=chatcli")


def run_queued_replays() -> None:
    """What the worker does, in this process (for tests that keep their transaction)."""
    for task in DBTaskResult.objects.filter(status="READY", queue_name="replays"):
        if task.task_path.endswith("replay_call"):  # a deep call view (test_deep_calls.py)
            deep_calls.run_call_replay(*task.args_kwargs["args"])
        else:
            background.run_background_replay(*task.args_kwargs["args"])
        DBTaskResult.objects.filter(pk=task.pk).update(status="SUCCESSFUL")


def test_a_long_session_is_replayed_by_the_worker_and_the_page_answers_at_once(
        personas, short_bound, replays_run):
    session = short_bound
    response = personas.client("viewer").get(url(session, NEW))
    assert response.status_code == 202
    html = response.content.decode()
    assert "Replaying in the background" in html
    assert f"0 of {session.model_call_count} calls" in html
    assert 'id="replay-pending"' in html and 'hx-trigger="every 1s"' in html
    row = BackgroundReplay.objects.get(session=session)  # the page polls its job
    assert f'hx-get="{reverse("job-poll", args=[row.pk])}"' in html
    assert not replays_run  # nothing replayed on the request thread
    assert not ReplayRun.objects.filter(session=session).exclude(
        key=services.default_settings(session).key).exists()
    (task,) = DBTaskResult.objects.all()
    assert task.queue_name == "replays" and task.task_path.endswith("store_replay")
    (row,) = BackgroundReplay.objects.all()
    assert row.status == Status.QUEUED and row.total == session.model_call_count
    assert task.args_kwargs["args"] == [session.pk, row.key]

    run_queued_replays()
    row.refresh_from_db()
    assert row.status == Status.DONE and row.done == row.total
    assert ReplayRun.objects.filter(session=session, key=row.key).exists()
    # The pending page's poll reloads it as the session page; opening it shows the replay.
    poll = personas.client("viewer").get(url(session, NEW), headers=PENDING)
    assert poll.status_code == 200 and poll["HX-Refresh"] == "true"
    page = personas.client("viewer").get(url(session, NEW), follow=True)
    assert page.status_code == 200
    assert "Replaying in the background" not in page.content.decode()
    assert 'id="call-view"' in page.content.decode()
    assert DBTaskResult.objects.count() == 1


def test_requests_for_a_pending_replay_join_it_whoever_asks(personas, short_bound,
                                                            replays_run):
    session = short_bound
    personas.client("viewer").get(url(session, NEW))
    again = personas.client("viewer").get(url(session, NEW), headers=PENDING)
    other = personas.client("reviewer").get(url(session, NEW))
    assert again.status_code == 200 and "Replaying in the background" in again.content.decode()
    assert other.status_code == 202 and "Replaying in the background" in other.content.decode()
    assert DBTaskResult.objects.count() == 1 and BackgroundReplay.objects.count() == 1
    assert not replays_run
    # Progress as the worker writes it.
    BackgroundReplay.objects.update(status=Status.RUNNING, done=7, started_at=timezone.now(),
                                    heartbeat_at=timezone.now())
    body = personas.client("reviewer").get(url(session, NEW), headers=PENDING).content.decode()
    assert f"7 of {session.model_call_count} calls" in body


def test_a_threshold_change_and_a_call_step_show_the_progress_in_their_region(
        personas, short_bound, replays_run):
    session = short_bound
    client = personas.client("viewer")
    region = client.get(url(session, NEW), headers=REPLAY)
    html = region.content.decode()
    assert region.status_code == 200
    assert html.lstrip().startswith('<section id="replay"') and "every 1s" in html
    step = client.get(url(session, NEW + "&call=3"), headers=CALL_VIEW).content.decode()
    assert step.lstrip().startswith('<section id="call-view"')
    assert not replays_run and DBTaskResult.objects.count() == 1
    run_queued_replays()
    replayed = len(replays_run)  # the worker's, run here
    # The summary is stored; call 3 is no call the worker's summary replay kept here: the
    # worker replays to it too (issue 28 item 4), in the same region.
    deep = client.get(url(session, NEW + "&call=3"), headers=CALL_VIEW).content.decode()
    assert deep.lstrip().startswith('<section id="call-view"')
    assert "Replaying to call 3 in the background" in deep and len(replays_run) == replayed
    run_queued_replays()
    done = client.get(url(session, NEW + "&call=3"), headers=CALL_VIEW).content.decode()
    assert 'id="call-view"' in done and "in the background" not in done
    assert "Call 3" in done
    replay = client.get(url(session, NEW), headers=REPLAY).content.decode()
    assert 'id="tokens-chart"' in replay


def test_the_load_test_follows_a_pending_region_to_its_result_as_the_page_does(
        personas, short_bound):
    """`make loadtest` polls a status element until its region holds the result (sessions
    past the inline bound, `--calls 2000`): its patterns match the templates' markup."""
    from loadtest.run import ENDED, POLLING

    client = personas.client("viewer")
    page = url(short_bound, NEW)
    pending = client.get(page, headers=REPLAY).content
    found = POLLING.search(pending)
    assert found is not None and found.group(2) == b"1"
    poll = html.unescape(found.group(1).decode())
    still = client.get(poll, headers={"HX-Request": "true", "HX-Current-URL": page}).content
    assert POLLING.search(still) is not None and ENDED.search(still) is None
    run_queued_replays()
    ended = ENDED.search(client.get(poll, headers={"HX-Request": "true",
                                                   "HX-Current-URL": page}).content)
    assert ended is not None
    result = client.get(html.unescape(ended.group(1).decode()),
                        headers={**REPLAY, "HX-Current-URL": page}).content.decode()
    assert result.lstrip().startswith('<section id="replay"') and 'id="tokens-chart"' in result
    assert POLLING.search(result.encode()) is None


def test_a_short_session_still_replays_inline(personas, long_session, replays_run):
    REPLAYS.clear()
    response = personas.client("viewer").get(url(long_session, NEW), follow=True)
    assert response.status_code == 200
    assert "Replaying in the background" not in response.content.decode()
    assert replays_run
    assert not BackgroundReplay.objects.exists() and not DBTaskResult.objects.exists()


def asked_ahead(reads: list[int], made: set[int], n: int) -> set[int]:
    """The calls whose jobs reading `reads` in turn asks of the worker (`deep_calls._ahead`):
    on each side, the job beyond the first call missing within AHEAD, so what it makes around
    itself begins there."""
    ahead: set[int] = set()
    for s in reads:
        low = max(0, s - deep_calls.AHEAD - deep_calls.AFTER)
        high = min(n - 1, s + deep_calls.AHEAD + deep_calls.BEFORE)
        forward = range(s + 1, min(n, s + deep_calls.AHEAD + 1))
        back = range(s - 1, max(-1, s - deep_calls.AHEAD - 1), -1)
        for side, job_for in ((forward, lambda m, high=high: min(high, m + deep_calls.BEFORE)),
                              (back, lambda m, low=low: max(low, m - deep_calls.AFTER))):
            missing = [c for c in side if c not in made | ahead]
            if missing and job_for(missing[0]) not in made | ahead:
                ahead.add(job_for(missing[0]))
    return ahead


def test_a_stored_replay_of_a_long_session_opens_without_the_worker(personas, short_bound):
    session = short_bound
    # What an import does: the default replay stored, and the call its page opens on.
    receivers.on_import_finished(None, sessions=[session])
    REPLAYS.clear()
    django_cache.clear()  # another process: the default cache is not shared
    response = personas.client("viewer").get(reverse("session-detail", args=[session.pk]),
                                             follow=True)
    assert response.status_code == 200 and 'id="call-view"' in response.content.decode()
    assert not BackgroundReplay.objects.exists()
    # `j` and `k` from there too: the import kept the calls on each side of it.
    run = services.stored_summary(session, services.default_settings(session))
    landing = page.selected_call(run, None)
    n = len(run.calls)
    window = {c for c in range(landing - services.KEPT_BEFORE, landing + services.KEPT_AFTER + 1)
              if 0 <= c < n}
    # Nothing the page needed went to the worker: only work asked ahead of a step.
    ahead = asked_ahead([landing], window, n)
    assert set(CallReplay.objects.exclude(status=Status.DONE).values_list(
        "call", flat=True)) == ahead
    assert DBTaskResult.objects.count() == len(ahead)
    steps = [c for c in (landing - 1, landing + 1) if 0 <= c < len(run.calls)]
    assert steps
    for call in steps:
        REPLAYS.clear()
        django_cache.clear()
        step = personas.client("viewer").get(
            reverse("session-detail", args=[session.pk]) + f"?call={call}", headers=CALL_VIEW)
        assert step.status_code == 200 and f'data-call="{call}"' in step.content.decode()
    done = CallReplay.objects.filter(status=Status.DONE)
    assert set(done.values_list("call", flat=True)) == window
    # Only the jobs making the first calls past them are asked of the worker, ahead of the
    # next step.
    ahead = asked_ahead([landing, *steps], window, n)
    queued = CallReplay.objects.filter(status=Status.QUEUED)
    assert set(queued.values_list("call", flat=True)) == ahead
    assert DBTaskResult.objects.count() == len(ahead)


def test_outsiders_get_404_and_queue_nothing(personas, short_bound):
    for name in ("outsider",):
        assert personas.client(name).get(url(short_bound, NEW)).status_code == 404
    anonymous = personas.client("anonymous").get(url(short_bound, NEW))
    assert anonymous.status_code in (302, 404)
    assert not BackgroundReplay.objects.exists() and not DBTaskResult.objects.exists()


def test_a_replay_whose_worker_went_away_is_queued_again(personas, short_bound, settings):
    session = short_bound
    personas.client("viewer").get(url(session, NEW))
    long_ago = timezone.now() - timedelta(seconds=settings.CTXSIM_IMPORT_TIMEOUT_SECONDS + 5)
    BackgroundReplay.objects.update(status=Status.RUNNING, done=3, started_at=long_ago,
                                    heartbeat_at=long_ago)
    first = DBTaskResult.objects.get()
    assert str(first.pk) == BackgroundReplay.objects.get().task_id
    DBTaskResult.objects.update(status="RUNNING", started_at=long_ago)  # as its worker left it
    personas.client("viewer").get(url(session, NEW), headers=PENDING)
    row = BackgroundReplay.objects.get()
    assert row.status == Status.QUEUED and row.done == 0
    assert DBTaskResult.objects.count() == 2
    first.refresh_from_db()
    assert first.status == "FAILED" and first.exception_class_path.endswith("WorkerLost")
    assert row.task_id != str(first.pk)
    run_queued_replays()  # the new task
    assert BackgroundReplay.objects.get().status == Status.DONE
    # The lost task, were it run after all, finds the row done and does nothing.
    assert background.run_background_replay(session.pk, row.key) == {"status": "skipped"}


def test_a_fresh_running_replay_is_left_alone(personas, short_bound):
    personas.client("viewer").get(url(short_bound, NEW))
    BackgroundReplay.objects.update(status=Status.RUNNING, started_at=timezone.now(),
                                    heartbeat_at=timezone.now())
    personas.client("viewer").get(url(short_bound, NEW), headers=PENDING)
    assert BackgroundReplay.objects.get().status == Status.RUNNING
    assert DBTaskResult.objects.count() == 1


def test_a_summary_dropped_after_it_was_stored_is_replayed_again(personas, short_bound):
    session = short_bound
    personas.client("viewer").get(url(session, NEW))
    run_queued_replays()
    key = BackgroundReplay.objects.get().key
    ReplayRun.objects.filter(session=session, key=key).delete()
    REPLAYS.clear()
    response = personas.client("viewer").get(url(session, NEW))
    assert response.status_code == 202
    assert BackgroundReplay.objects.get().status == Status.QUEUED
    assert DBTaskResult.objects.filter(status="READY").count() == 1


def test_a_failed_background_replay_says_why_and_stops_polling(personas, short_bound,
                                                               monkeypatch):
    session = short_bound
    personas.client("viewer").get(url(session, NEW))

    def broken(*args, **kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(services, "_replay_and_store", broken)
    run_queued_replays()
    row = BackgroundReplay.objects.get()
    assert row.status == Status.FAILED and "the disk is full" in row.message
    body = personas.client("viewer").get(url(session, NEW)).content.decode()
    assert "the disk is full" in body and "every 1s" not in body


def test_the_worker_reports_progress_per_call(personas, long_session):
    from ctxsim.pipeline.profiles import PROFILES
    from ctxsim.replays.state import ReplaySettings

    seen = []
    settings = ReplaySettings(profile_ref="none", profile=PROFILES["none"])
    services.summary_for(long_session, settings, progress=seen.append)
    assert seen == list(range(1, long_session.model_call_count + 1))


def test_the_settings_a_row_was_queued_with_must_still_replay_alike(personas, short_bound):
    """A team profile edited between the queueing and the replay: the worker does not store a
    replay under a key it does not belong to, and says so."""
    personas.client("viewer").get(url(short_bound, NEW))
    BackgroundReplay.objects.update(key="0" * 64)
    DBTaskResult.objects.update(args_kwargs={"args": [short_bound.pk, "0" * 64], "kwargs": {}})
    run_queued_replays()
    row = BackgroundReplay.objects.get()
    assert row.status == Status.FAILED and "settings changed" in row.message
    assert not ReplayRun.objects.filter(key="0" * 64).exists()


# db_worker closes its database connection after a task, which would break PostgreSQL's test
# transaction: this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_the_real_worker_stores_the_replay_the_page_waits_for(personas, short_bound):
    personas.client("viewer").get(url(short_bound, NEW))
    call_command("db_worker", "--batch", "--queue-name", "replays", "--no-startup-delay",
                 "--no-reload", verbosity=0)
    assert BackgroundReplay.objects.get().status == Status.DONE
    assert DBTaskResult.objects.get().status == "SUCCESSFUL"
    response = personas.client("viewer").get(url(short_bound, NEW), follow=True)
    assert response.status_code == 200 and 'id="call-view"' in response.content.decode()


# --- the per-user limit, across processes ------------------------------------------------------


def test_a_replay_another_process_runs_for_the_user_counts_against_their_limit(personas,
                                                                                stored):
    """issue 20 item 4: the limit was per process, so a user's requests spread over several
    gunicorn workers each got a slot. The count is shared through Django's cache: here
    another process (as far as this one knows) holds the viewer's only slot."""
    viewer = personas.users["viewer"]
    name = limits.shared_slot_name(viewer.pk)
    django_cache.set(name, 1, timeout=60)
    try:
        with REPLAYS.another_process():
            busy = personas.client("viewer").get(
                reverse("session-detail", args=[stored.pk]) + f"?{NEW}", follow=True)
            assert busy.status_code == 429
            assert django_cache.get(name) == 1  # refused: nothing taken, nothing given back
            other = personas.client("reviewer").get(
                reverse("session-detail", args=[stored.pk]) + f"?{NEW}", follow=True)
            assert other.status_code == 200
        django_cache.set(name, 0, timeout=60)
        fine = personas.client("viewer").get(
            reverse("session-detail", args=[stored.pk]) + "?env.CHATCLI_TOOL_RESULT_MAX_CHARS=4322",
            follow=True)
        assert fine.status_code == 200
        assert django_cache.get(name) == 0  # given back after the replay
    finally:
        django_cache.delete(name)


@pytest.mark.django_db(transaction=True)
def test_requests_arriving_together_queue_the_replay_once(personas, short_bound):
    """Four reviewers open the same new settings at the same moment: one row, one task."""
    import threading

    from django.db import connections

    barrier = threading.Barrier(4)
    codes: list[int] = []

    def open_page(name: str) -> None:
        try:
            client = personas.client(name)
            barrier.wait()
            codes.append(client.get(url(short_bound, NEW)).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=open_page, args=(name,))
               for name in ("owner", "reviewer", "viewer", "viewer")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert codes == [202] * 4
    assert BackgroundReplay.objects.count() == 1 and DBTaskResult.objects.count() == 1


def test_fragments_of_a_pending_replay_say_so_and_replay_nothing(personas, short_bound,
                                                                 replays_run):
    client = personas.client("viewer")
    query = f"?profile=chatcli&{NEW}&call=3"
    rows = client.get(reverse("session-rows", args=[short_bound.pk]) + query + "&from=0&to=5")
    body = client.get(reverse("session-message", args=[short_bound.pk]) + query + "&row=1")
    for response in (rows, body):
        assert response.status_code == 202
        assert "running in the background" in response.content.decode()
    assert not replays_run
    assert BackgroundReplay.objects.count() == 1 and DBTaskResult.objects.count() == 1


def test_the_worker_lets_go_of_what_it_replayed_once_the_task_ends(personas, short_bound,
                                                                  monkeypatch):
    """Issue 31: the worker kept the finished replay (memos, cost cache, made messages) for a
    page request that never comes to a worker process."""
    import gc
    import weakref

    made = []
    real = services.replay

    def tracked(*args, **kwargs):
        rep = real(*args, **kwargs)
        made.append(weakref.ref(rep))
        return rep

    monkeypatch.setattr(services, "replay", tracked)
    client = personas.client("viewer")
    assert client.get(url(short_bound)).status_code == 202  # queued for the worker
    task = DBTaskResult.objects.get(queue_name="replays")
    assert background.store_replay.call(*task.args_kwargs["args"])["status"] == "done"
    assert made and REPLAYS.kept.total == 0 and REPLAYS.live.total == 0
    gc.collect()
    assert [ref() for ref in made] == [None]
    # The page still opens from the stored summary.
    assert client.get(url(short_bound)).status_code == 200


def test_a_long_session_of_an_agent_release_is_replayed_by_the_worker_under_its_era(
        personas, short_bound):
    """The worker parses the page's query again with the session's era, as the page did: a
    Claude Code session of a release with an era used to fail every background replay with
    "the settings changed before the replay ran" (its key without the era was another)."""
    from ctxsim.pipeline.eras import VERSION_KEYS
    from ctxsim.transcripts.models import Session

    Session.objects.filter(pk=short_bound.pk).update(
        format="claude-code", meta={**(short_bound.meta or {}),
                                    VERSION_KEYS["claude-code"]: "2.0.30"})
    session = Session.objects.get(pk=short_bound.pk)
    settings = services.default_settings(session)
    assert settings.era is not None and settings.era.version == "2.0.30"
    ReplayRun.objects.filter(session=session).delete()
    response = personas.client("viewer").get(reverse("session-detail", args=[session.pk]))
    assert response.status_code == 202
    (row,) = BackgroundReplay.objects.filter(session=session)
    assert row.key == settings.key
    run_queued_replays()
    row.refresh_from_db()
    assert (row.status, row.message) == (Status.DONE, "")
    assert ReplayRun.objects.filter(session=session, key=settings.key).exists()
