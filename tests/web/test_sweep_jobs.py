"""Issue 20 item 12: sweeps never sit "running" forever, can be cancelled, and never hold the
worker that imports run on."""

from __future__ import annotations

import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from ctxsim.analysis import tasks as sweep_tasks
from ctxsim.analysis.models import Sweep
from ctxsim.insights import sweep as sweeps
from tests.factories import heartbeat_moves

ROOT = Path(__file__).resolve().parents[2]
AXES = [{"name": "toolContextCount", "values": [1, 2, 3]}]
CACHE = {"model": "gpt-5", "lifetime": "", "price": None}


def make_sweep(session, **fields) -> Sweep:
    return Sweep.objects.create(session=session, query="profile=aivax", axes=AXES, cache=CACHE,
                                total=3, **fields)


def polled(client, sweep) -> str:
    url = reverse("sweep-detail", args=[sweep.session_id, sweep.pk])
    return client.get(url, headers={"HX-Request": "true",
                                    "HX-Target": "div#sweep-status"}).content.decode()


@pytest.mark.django_db
def test_a_sweep_whose_worker_died_says_so_and_polling_stops(personas, long_session):
    """issue 20 item 12: a killed worker left a sweep "running 18 of 400" forever, polled
    every second."""
    old = timezone.now() - timedelta(hours=1)
    # Already queued again once after a lost worker (issue 30: every kind is, once).
    sweep = make_sweep(long_session, status=Sweep.Status.RUNNING, done=1, attempts=1)
    Sweep.objects.filter(pk=sweep.pk).update(heartbeat_at=old)
    body = polled(personas.client("viewer"), sweep)
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.FAILED
    assert "after 1 of 3" in sweep.message and "worker" in sweep.message
    assert "every 1s" not in body and "after 1 of 3" in body


@pytest.mark.django_db
def test_a_sweep_whose_worker_died_the_first_time_is_queued_again(personas, long_session):
    """issue 30: a lost sweep is settled as every kind of job: queued again once."""
    from django_tasks_db.models import DBTaskResult

    old = timezone.now() - timedelta(hours=1)
    sweep = make_sweep(long_session, status=Sweep.Status.RUNNING, done=1)
    Sweep.objects.filter(pk=sweep.pk).update(heartbeat_at=old)
    body = polled(personas.client("viewer"), sweep)
    sweep.refresh_from_db()
    assert (sweep.status, sweep.attempts, sweep.heartbeat_at) == (Sweep.Status.QUEUED, 1, None)
    assert "worker stopped while sweeping" in sweep.message and "queued again" in sweep.message
    (task,) = DBTaskResult.objects.all()
    assert str(task.pk) == sweep.task_id and task.args_kwargs["args"] == [sweep.pk]
    assert "every 1s" in body  # still polled: the next worker runs it


@pytest.mark.django_db
def test_the_task_row_of_a_sweep_whose_worker_died_is_settled_too(personas, long_session):
    """issue 20 item 11: django-tasks-db's row stayed RUNNING while the sweep said failed."""
    from django_tasks_db.models import DBTaskResult

    old = timezone.now() - timedelta(hours=1)
    task = DBTaskResult.objects.create(
        status="RUNNING", args_kwargs={"args": [0], "kwargs": {}},
        task_path="ctxsim.analysis.tasks.run_sweep", queue_name="sweeps",
        backend_name="default", run_after=old, started_at=old)
    sweep = make_sweep(long_session, status=Sweep.Status.RUNNING, task_id=str(task.pk))
    Sweep.objects.filter(pk=sweep.pk).update(heartbeat_at=old)
    assert sweep_tasks.fail_stuck_sweeps() == 1
    task.refresh_from_db()
    assert task.status == "FAILED" and "no heartbeat" in task.traceback


@pytest.mark.django_db
def test_a_running_sweep_with_a_fresh_heartbeat_is_left_alone(personas, long_session):
    """issue 20 item 12: only a silent sweep is given up."""
    sweep = make_sweep(long_session, status=Sweep.Status.RUNNING, heartbeat_at=timezone.now())
    body = polled(personas.client("viewer"), sweep)
    assert "every 1s" in body and f'hx-get="{reverse("job-poll", args=[sweep.pk])}"' in body
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.RUNNING


@pytest.mark.django_db
def test_the_worker_settles_sweeps_a_dead_worker_left_running(personas, long_session):
    """issue 20 item 12: each sweep the worker starts first settles the stuck ones."""
    old = timezone.now() - timedelta(hours=1)
    stale = make_sweep(long_session, status=Sweep.Status.RUNNING)
    Sweep.objects.filter(pk=stale.pk).update(heartbeat_at=old)
    fresh = make_sweep(long_session)
    sweep_tasks.run_sweep_job(fresh.pk)
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.status, stale.attempts) == (Sweep.Status.QUEUED, 1)  # queued again, once
    assert fresh.status == Sweep.Status.DONE


@pytest.mark.django_db
def test_a_reviewer_cancels_a_sweep_and_the_worker_stops_at_the_next_point(
        personas, long_session, monkeypatch):
    """issue 20 item 12: no way to stop a 400-point sweep that held the worker 33 minutes."""
    sweep = make_sweep(long_session)
    url = reverse("sweep-cancel", args=[long_session.pk, sweep.pk])
    assert personas.client("viewer").post(url).status_code == 403
    assert personas.client("outsider").post(url).status_code == 404
    real = sweeps.run_sweep
    seen = []

    def cancelled_half_way(source, axes, rule, progress, **options):
        def watching(done, total):
            seen.append(done)
            if done == 1:
                assert personas.client("reviewer").post(url).status_code == 302
            progress(done, total)

        return real(source, axes, rule, watching, **options)

    monkeypatch.setattr(sweeps, "run_sweep", cancelled_half_way)
    result = sweep_tasks.run_sweep_job(sweep.pk)
    sweep.refresh_from_db()
    assert result["status"] == "cancelled"
    assert sweep.status == Sweep.Status.FAILED and "cancelled by reviewer" in sweep.message
    assert seen == [1]  # the worker stops at the report that follows the cancel
    assert "every 1s" not in polled(personas.client("viewer"), sweep)


@pytest.mark.django_db
def test_an_active_sweep_shows_writers_a_cancel_button(personas, long_session):
    """issue 20 item 12."""
    sweep = make_sweep(long_session, status=Sweep.Status.RUNNING, heartbeat_at=timezone.now())
    url = reverse("sweep-cancel", args=[long_session.pk, sweep.pk])
    assert url in polled(personas.client("reviewer"), sweep)
    assert url not in polled(personas.client("viewer"), sweep)


@pytest.mark.django_db(transaction=True)
def test_a_sweep_beats_its_heartbeat_while_one_point_replays(personas, long_session,
                                                              monkeypatch):
    """issue 20 item 12: progress is written per point only; a long point looked dead. The
    patched point waits until it has seen the heartbeat move (up to 60 s, else the test
    fails)."""
    monkeypatch.setattr(sweep_tasks, "HEARTBEAT_EVERY", 0.05)
    sweep = make_sweep(long_session)
    real = sweeps.run_sweep
    moved = threading.Event()

    def long_point(source, axes, rule, progress, **options):
        if heartbeat_moves(Sweep, sweep.pk):
            moved.set()
        return real(source, axes, rule, progress, **options)

    monkeypatch.setattr(sweeps, "run_sweep", long_point)
    sweep_tasks.run_sweep_job(sweep.pk)
    assert moved.is_set()
    assert Sweep.objects.get(pk=sweep.pk).status == Sweep.Status.DONE


@pytest.mark.parametrize("script", ["serve-prod", "run-dev"])
def test_sweeps_have_their_own_worker_so_imports_never_wait_behind_one(script):
    """issue 20 item 12: one 400-point sweep held the only worker while other teams' imports
    waited. Each server script runs one worker per queue (issue 28: imports, replays and
    sweeps; tests/web/test_supervisor.py starts them for real)."""
    text = (ROOT / "bin" / script).read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "bin" / script)]).returncode == 0
    for queue in ("imports,default", "replays", "sweeps"):
        assert f'$WORKER --queue-name {queue}"' in text


# --- a real worker killed in every phase (issue 20 acceptance 5) -----------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("phase", sweep_tasks.PHASES)
def test_a_worker_killed_in_any_phase_of_a_sweep_leaves_a_sweep_that_finishes(
        phase, personas, long_session, settings, tmp_path):
    """issue 20 acceptance 5, issue 30 acceptance 2: a real `db_worker` is SIGKILLed when the
    sweep's row shows it in `phase` (each phase a sweep declares), a new worker starts, and
    the sweep page settles the dead run as every kind of job: queued again once, and the new
    worker finishes it (one sweep, every point); the dead run's task row says its worker was
    lost."""
    from django_tasks_db.models import DBTaskResult

    from tests.web import workers

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CTXSIM_SWEEP_TIMEOUT_SECONDS = 2
    env = workers.worker_env(settings, CTXSIM_SWEEP_TIMEOUT_SECONDS="2")
    sweep = make_sweep(long_session)
    task = sweep_tasks.run_sweep.enqueue(sweep.pk)
    Sweep.objects.filter(pk=sweep.pk).update(task_id=str(task.id))

    def in_phase():
        row = Sweep.objects.get(pk=sweep.pk)
        return row if sweep_tasks.phase_of(row) == phase else None

    with workers.running(env, stop_at=phase) as first:
        row = workers.wait_for(in_phase, 120, f"the sweep to reach {phase!r}", first)
        workers.kill(first)
    done = Sweep.objects.get(pk=sweep.pk).done
    assert done == row.done  # nothing moved after the kill
    client = personas.client("viewer")

    def settled():
        polled(client, sweep)  # the page settles a stuck sweep
        row = Sweep.objects.get(pk=sweep.pk)
        ended = row.status in (Sweep.Status.DONE, Sweep.Status.FAILED)
        return polled(client, sweep) if ended else None

    with workers.running(env) as second:
        body = workers.wait_for(settled, 120, "the sweep to finish", second)
        workers.wait_for(lambda: not DBTaskResult.objects.filter(status="RUNNING").exists(),
                         60, "the worker to record the end of its task", second)
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.DONE, sweep.message
    assert (sweep.attempts, len(sweep.points)) == (1, sweep.total)
    assert "every 1s" not in body
    assert Sweep.objects.count() == 1
    (lost,) = DBTaskResult.objects.filter(status="FAILED")
    assert lost.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 1
