"""Issue 30 acceptance 2: killing a worker mid-job leaves every kind of job settled the same way
(`ctxsim.jobs.lifecycle`): the lost attempt's task row says its worker was lost, the job is
queued again once, and the next worker finishes it. Imports and sweeps are killed in each of
their phases in tests/web/test_import_jobs.py and tests/web/test_sweep_jobs.py; here the
kinds of the `replays` queue: a session page's background replay, a trace file, a deep call
view and an insights column (the overview's kinds: tests/web/test_overview_kills.py)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis.models import InsightsJob, SessionResult
from ctxsim.jobs.models import Status, TraceFile
from ctxsim.replays.cache import REPLAYS
from ctxsim.replays.models import BackgroundReplay, CallReplay
from tests.web import workers

POLL = {"HX-Request": "true"}


@pytest.fixture
def long(settings, long_session, tmp_path):
    settings.CTXSIM_INLINE_REPLAY_CALLS = long_session.model_call_count - 1
    settings.CTXSIM_IMPORT_TIMEOUT_SECONDS = 2
    settings.MEDIA_ROOT = tmp_path / "media"
    REPLAYS.clear()
    return long_session


def killed_then_finished(settings, model, phase: str, ask, ended=None) -> object:
    """Start a worker that stops in `phase`, kill it there, then ask again (`ask`: the page
    polling it) with a new worker running until the job ended; returns the job's row."""
    env = workers.worker_env(settings, CTXSIM_IMPORT_TIMEOUT_SECONDS="2",
                             CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS="2",
                             CTXSIM_INSIGHTS_INLINE_CALLS="0",
                             CTXSIM_INLINE_REPLAY_CALLS=str(settings.CTXSIM_INLINE_REPLAY_CALLS))
    with workers.running(env, stop_at=phase) as first:
        workers.wait_for(model.objects.filter(status=Status.RUNNING).exists, 120,
                         f"the job to reach {phase!r}", first)
        workers.kill(first)

    def row_ended():
        ask()  # the page settles a job whose worker went away
        row = model.objects.get()
        return row if row.status in (Status.DONE, Status.FAILED) else None

    with workers.running(env) as second:
        row = workers.wait_for(ended or row_ended, 120, "the job to finish", second)
        workers.wait_for(lambda: not DBTaskResult.objects.filter(status="RUNNING").exists(),
                         60, "the worker to record the end of its task", second)
    return row


def assert_settled_the_same_way(row) -> None:
    assert row.status == Status.DONE, row.message
    assert row.attempts == 1  # queued again once, by the page that found it lost
    (lost,) = DBTaskResult.objects.filter(status="FAILED")
    assert lost.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert "no heartbeat" in lost.traceback
    # Its task queued again is the one that ran (a call view read may also ask work ahead of
    # a step: another row's task).
    assert DBTaskResult.objects.get(id=row.task_id).status == "SUCCESSFUL"
    assert str(lost.id) != row.task_id
    assert not DBTaskResult.objects.exclude(status__in=("FAILED", "SUCCESSFUL")).exists()


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_replay_leaves_a_replay_that_finishes(personas, long, settings):
    url = (reverse("session-detail", args=[long.pk])
           + "?profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=4321")
    viewer = personas.client("viewer")
    assert viewer.get(url).status_code == 202  # handed to the worker
    poll = reverse("job-poll", args=[BackgroundReplay.objects.get().pk])
    row = killed_then_finished(settings, BackgroundReplay, workers.REPLAYING,
                               lambda: viewer.get(poll, headers=POLL))  # the page's poll
    assert_settled_the_same_way(row)
    assert viewer.get(url).status_code == 200  # the summary is stored: the page itself


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_trace_leaves_a_trace_that_finishes(personas, long, settings):
    url = reverse("session-trace", args=[long.pk]) + "?profile=chatcli&summary=0"
    viewer = personas.client("viewer")
    assert viewer.get(url).status_code == 202  # written by the worker
    row = killed_then_finished(settings, TraceFile, workers.WRITING_TRACE,
                               lambda: viewer.get(url))
    assert_settled_the_same_way(row)
    done = viewer.get(url)
    assert done.status_code == 200 and done["Content-Disposition"].startswith("attachment")


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_replaying_to_a_deep_call_leaves_a_call_that_opens(personas, long,
                                                                          settings):
    from ctxsim.replays import services
    from ctxsim.replays.state import ReplaySettings

    services.summary_for(long, ReplaySettings())  # stored: only the call is the worker's
    REPLAYS.clear()
    url = reverse("session-detail", args=[long.pk]) + "?profile=chatcli&call=12"
    viewer = personas.client("viewer")
    assert viewer.get(url).status_code == 202  # replayed to by the worker

    def opened():
        viewer.get(url, headers={"HX-Request": "true", "HX-Target": "section#call-pending"})
        row = CallReplay.objects.get(call=12)
        return row if row.status in (Status.DONE, Status.FAILED) else None

    row = killed_then_finished(settings, CallReplay, workers.REPLAYING_TO_CALL, lambda: None,
                               opened)
    assert_settled_the_same_way(row)
    REPLAYS.clear()
    page = viewer.get(url, headers={"HX-Request": "true", "HX-Target": "div#call-view"})
    assert page.status_code == 200 and 'data-call="12"' in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_insights_leaves_a_column_that_finishes(personas, long, settings):
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    settings.CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS = 2
    url = reverse("session-insights", args=[long.pk]) + "?profiles=chatcli"
    viewer = personas.client("viewer")
    viewer.get(url)  # the column is handed to the worker
    job = InsightsJob.objects.get()
    seen = []

    def ask():
        viewer.get(reverse("job-poll", args=[job.pk]), headers=POLL)  # the page's poll
        seen.extend(InsightsJob.objects.values_list("attempts", flat=True))

    def stored():  # the worker ends the job once its result is stored
        ask()
        return (InsightsJob.objects.get().status == InsightsJob.Status.DONE
                and SessionResult.objects.exists())

    killed_then_finished(settings, InsightsJob, workers.COMPUTING_INSIGHTS, ask, stored)
    assert 1 in seen  # queued again once, by the page that found it lost
    (lost,) = DBTaskResult.objects.filter(status="FAILED")
    assert lost.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert str(lost.pk) == job.task_id
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 1

