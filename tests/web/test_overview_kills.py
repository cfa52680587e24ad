"""Issue 30 acceptance 2, for the overview's kinds: a real `db_worker` killed in the middle of
an overview column task or of a corpus sweep's part leaves the job settled as every kind is
(`ctxsim.jobs.lifecycle`): its task row says the worker was lost, the job is queued again
once and the next worker finishes it — each session's figures stored once, every status true.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis.models import SessionResult
from ctxsim.generator import generate_session
from ctxsim.jobs.models import Status
from ctxsim.overview.models import ColumnTask, CorpusSweep, CorpusSweepPart
from ctxsim.replays.cache import REPLAYS
from ctxsim.transcripts.store import save_sessions
from tests.web import workers

pytestmark = pytest.mark.django_db(transaction=True)

RESULTS = {"HX-Request": "true", "HX-Target": "section#overview-results"}


@pytest.fixture
def env(settings, tmp_path):
    settings.CTXSIM_IMPORT_TIMEOUT_SECONDS = 2  # the page's side: silent 2 s is lost
    settings.MEDIA_ROOT = tmp_path / "media"
    REPLAYS.clear()
    return workers.worker_env(settings, CTXSIM_IMPORT_TIMEOUT_SECONDS="2")


def sessions(personas, n: int):
    return save_sessions([generate_session(4 + i % 3, seed=i, oversize_every=2)
                          for i in range(n)], team=personas.team, user=personas.users["owner"])


def the_lost_task(job) -> DBTaskResult:
    (lost,) = DBTaskResult.objects.filter(status="FAILED")
    assert lost.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert "no heartbeat" in lost.traceback
    assert str(lost.pk) != job.task_id  # the job's task is its next attempt's
    assert not DBTaskResult.objects.exclude(status__in=("FAILED", "SUCCESSFUL")).exists()
    return lost


def test_a_worker_killed_mid_column_leaves_an_overview_that_completes(personas, env):
    rows = sessions(personas, 8)  # enough for a helper copy: two jobs share the column
    url = reverse("team-overview") + "?profiles=none"
    viewer = personas.client("viewer")
    viewer.get(url)
    assert ColumnTask.objects.count() == 2
    with workers.running(env, stop_at=workers.COMPUTING_FIGURES) as first:
        workers.wait_for(SessionResult.objects.filter(attempt__isnull=False).exists, 120,
                         "a row claimed by the column's first task", first)
        workers.kill(first)
    (dead,) = ColumnTask.objects.filter(status=Status.RUNNING)
    claimed = SessionResult.objects.get(attempt__isnull=False)
    assert claimed.job_id == dead.pk

    def complete():
        overview = viewer.get(url, headers=RESULTS).context["overview"]
        return overview if overview.complete else None

    with workers.running(env) as second:
        overview = workers.wait_for(complete, 120, "the overview to complete", second)
        workers.wait_for(lambda: not ColumnTask.objects.filter(
            status__in=(Status.QUEUED, Status.RUNNING)).exists(), 60, "both jobs ended", second)
        workers.wait_for(lambda: not DBTaskResult.objects.filter(status="RUNNING").exists(),
                         60, "the worker to record the end of its task", second)
    column = overview.columns[0]
    assert (column.done, column.failed, column.pending) == (len(rows), 0, 0)
    assert column.totals["sessions"] == len(rows)  # each session summed once
    assert SessionResult.objects.count() == len(rows)
    assert not SessionResult.objects.filter(figures__isnull=True).exists()
    dead.refresh_from_db()
    assert (dead.status, dead.attempts) == (Status.DONE, 1)  # queued again once
    helper = ColumnTask.objects.exclude(pk=dead.pk).get()
    assert (helper.status, helper.attempts) == (Status.DONE, 0)  # never lost: never settled
    lost = the_lost_task(dead)
    assert lost.args_kwargs["args"] == [dead.pk]
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 2


def test_a_worker_killed_mid_part_leaves_a_corpus_sweep_that_completes(personas, env):
    rows = sessions(personas, 2)
    created = personas.client("reviewer").post(reverse("corpus-sweep-create"), {
        "profiles": "aivax", "param1": "toolContextCount", "start1": "1", "stop1": "2",
        "step1": "1", "model": "gpt-5"})
    assert created.status_code == 302
    sweep = CorpusSweep.objects.get()
    with workers.running(env, stop_at=workers.SWEEPING_SESSION) as first:
        workers.wait_for(CorpusSweepPart.objects.filter(status=Status.RUNNING).exists, 120,
                         "a part to run", first)
        workers.kill(first)
    dead = CorpusSweepPart.objects.get(status=Status.RUNNING)
    viewer = personas.client("viewer")
    page = reverse("corpus-sweep-detail", args=[sweep.pk])

    def finished():
        viewer.get(page)  # the page settles a part whose worker went away
        sweep.refresh_from_db()
        return sweep.status == Status.DONE

    with workers.running(env) as second:
        workers.wait_for(finished, 120, "the sweep to finish", second)
        workers.wait_for(lambda: not DBTaskResult.objects.filter(status="RUNNING").exists(),
                         60, "the worker to record the end of its task", second)
    assert sweep.message == "" and len(sweep.points) == 2
    assert all(p["sessions"] == len(rows) and not p["errors"] for p in sweep.points)
    dead.refresh_from_db()
    assert (dead.status, dead.attempts, len(dead.points)) == (Status.DONE, 1, 2)
    assert set(sweep.parts.values_list("status", "attempts")) == {
        (Status.DONE, 1), (Status.DONE, 0)}
    lost = the_lost_task(dead)
    assert lost.args_kwargs["args"] == [dead.pk]
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 2
