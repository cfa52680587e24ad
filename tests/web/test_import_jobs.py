"""Issue 20 item 11: a background import job never lies about what it stored."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from ctxsim import importers
from ctxsim.jobs import lifecycle
from ctxsim.transcripts import services, tasks
from ctxsim.transcripts.models import ImportJob, Session
from tests.factories import claude_code_bytes, heartbeat_moves, upload


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 1000


def queued_job(personas, django_capture_on_commit_callbacks) -> ImportJob:
    with django_capture_on_commit_callbacks(execute=False):
        services.queue_import(upload("big.jsonl", claude_code_bytes(8)), team=personas.team,
                              user=personas.users["owner"])
    return ImportJob.objects.get()


def later(seconds: int):
    return timezone.now() + timedelta(seconds=seconds)


@pytest.mark.django_db
def test_a_worker_killed_after_the_commit_leaves_a_job_that_says_its_sessions_exist(
        personas, monkeypatch, django_capture_on_commit_callbacks):
    """issue 20 item 11: killed after the import committed, the job said "nothing was stored,
    re-queue it", and re-queueing duplicated the sessions. The sessions are now linked to
    the job inside the import's transaction."""
    job = queued_job(personas, django_capture_on_commit_callbacks)

    def killed(rows):
        raise KeyboardInterrupt  # SIGINT right after the import's transaction committed

    monkeypatch.setattr(tasks, "finish_import", killed)
    with pytest.raises(KeyboardInterrupt):
        tasks.run_import_job(job.pk, 0)
    (session,) = Session.objects.all()
    job.refresh_from_db()
    assert job.session_ids == [session.pk]
    with django_capture_on_commit_callbacks(execute=False):
        assert services.fail_stuck_jobs(later(3600)) == 1
    job.refresh_from_db()
    # Queued again to finish what the dead attempt left: the list figures, not the import.
    assert job.status == ImportJob.Status.QUEUED and job.session_ids == [session.pk]
    monkeypatch.undo()
    tasks.run_import_job(job.pk, 1)
    job.refresh_from_db()
    session.refresh_from_db()
    assert job.status == ImportJob.Status.DONE, job.message
    assert "nothing was stored" not in job.message and job.session_ids == [session.pk]
    assert session.peak_sent_tokens > 0  # the stats the dead attempt never computed
    assert job.stored_name == ""  # done: its upload is deleted
    assert services.requeue(job) != ""  # nothing to re-queue: it is done
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_a_job_that_stored_its_sessions_and_lost_its_retry_too_is_settled_done(
        personas, django_capture_on_commit_callbacks):
    """issue 20 item 11: past its one retry, a job whose sessions are stored says done (and
    that the figures come when the sessions are opened), never "nothing was stored"."""
    job = queued_job(personas, django_capture_on_commit_callbacks)
    tasks.run_import_job(job.pk, 0)
    (session,) = Session.objects.all()
    old = later(-7200)
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING, attempts=1,
                                               stored_name="uploads/gone.upload",
                                               started_at=old, heartbeat_at=old)
    assert services.fail_stuck_jobs() == 1
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE and job.session_ids == [session.pk]
    assert "computed when they are opened" in job.message and job.stored_name == ""


@pytest.mark.django_db
def test_an_import_whose_job_was_given_up_meanwhile_stores_nothing(
        personas, monkeypatch, django_capture_on_commit_callbacks):
    """issue 20 item 11: a slow parse was marked failed, then flipped to done when it ended
    (and with a re-queue, imported twice). The import commits only while its job is still
    the running attempt; otherwise it rolls back and the job keeps saying what happened."""
    job = queued_job(personas, django_capture_on_commit_callbacks)
    name = job.stored_name
    real_load = importers.load

    def slow_load(*args, **kwargs):
        parsed = real_load(*args, **kwargs)
        # Meanwhile the page decided the job was stuck.
        services.fail_stuck_jobs(later(3600))
        return parsed

    monkeypatch.setattr(importers, "load", slow_load)
    with django_capture_on_commit_callbacks(execute=False):
        tasks.run_import_job(job.pk, 0)
    job.refresh_from_db()
    # Given up as stuck, it was queued again (once): the late first attempt stored nothing.
    assert job.status == ImportJob.Status.QUEUED and job.attempts == 1
    assert not Session.objects.exists()
    assert default_storage.exists(job.stored_name)  # kept, so the retry can run it
    monkeypatch.setattr(importers, "load", real_load)
    tasks.run_import_job(job.pk, 1)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE and Session.objects.count() == 1
    assert job.stored_name == "" and not default_storage.exists(name)


@pytest.mark.django_db
def test_a_silent_parse_given_up_after_its_retry_leaves_no_upload_behind(
        personas, monkeypatch, django_capture_on_commit_callbacks):
    """issue 20 item 11: a parse that stayed silent past the timeout and never reached the
    store step left its upload on disk. Settled as failed (after its one retry), the job's
    upload is deleted, whichever side settles it first."""
    job = queued_job(personas, django_capture_on_commit_callbacks)
    ImportJob.objects.filter(pk=job.pk).update(attempts=lifecycle.AUTO_RETRIES)
    name = job.stored_name
    real_load = importers.load

    def silent_load(*args, **kwargs):
        parsed = real_load(*args, **kwargs)
        services.fail_stuck_jobs(later(3600))  # the page gave it up meanwhile
        return parsed

    monkeypatch.setattr(importers, "load", silent_load)
    assert tasks.run_import_job(job.pk, lifecycle.AUTO_RETRIES)["status"] == "given up"
    job.refresh_from_db()
    assert job.status == ImportJob.Status.FAILED and "upload the file again" in job.message
    assert not Session.objects.exists()
    assert job.stored_name == "" and not default_storage.exists(name)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_goes_on_while_a_long_parse_reports_nothing(
        personas, monkeypatch, django_capture_on_commit_callbacks):
    """issue 20 item 11: no heartbeat while parsing (or computing stats), so a slow parse
    was marked failed. A heartbeat runs beside the whole job; this parse waits until it has
    seen the heartbeat move (it gives up after 60 s, which fails the test)."""
    monkeypatch.setattr(tasks.JobReporter, "HEARTBEAT_EVERY", 0.05)
    job = queued_job(personas, django_capture_on_commit_callbacks)
    real_load = importers.load
    moved = threading.Event()

    def parse_without_reporting(*args, **kwargs):
        if heartbeat_moves(ImportJob, job.pk):
            moved.set()
        return real_load(*args, **kwargs)

    monkeypatch.setattr(importers, "load", parse_without_reporting)
    tasks.run_import_job(job.pk, 0)
    assert moved.is_set()
    assert ImportJob.objects.get(pk=job.pk).status == ImportJob.Status.DONE


@pytest.mark.django_db
def test_the_worker_recovers_jobs_a_dead_worker_left_running(
        personas, django_capture_on_commit_callbacks):
    """issue 20 item 11: after a worker restart, jobs stayed "running" forever unless someone
    opened the upload page. Each job the worker starts first settles the stuck ones."""
    stale = queued_job(personas, django_capture_on_commit_callbacks)
    old = timezone.now() - timedelta(hours=2)
    ImportJob.objects.filter(pk=stale.pk).update(status=ImportJob.Status.RUNNING,
                                                 started_at=old, heartbeat_at=old)
    with django_capture_on_commit_callbacks(execute=False):
        services.queue_import(upload("next.jsonl", claude_code_bytes(3)), team=personas.team,
                              user=None)
    fresh = ImportJob.objects.exclude(pk=stale.pk).get()
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.run_import_job(fresh.pk, 0)
    stale.refresh_from_db()
    # Nothing was stored: queued again once, with its upload, to finish it.
    assert stale.status == ImportJob.Status.QUEUED and stale.attempts == 1
    assert default_storage.exists(stale.stored_name) and len(sent) == 1


def test_progress_counts_only_what_is_read_from_the_start_on():
    """issue 20 item 11: the bar showed 90 % after a second: an offset reached by seeking
    (the size probe seeks to the end) counted as read. Only bytes read contiguously from the
    start move it now."""
    seen = []
    data = claude_code_bytes(20)
    stream = tasks.ProgressStream(io.BytesIO(data), len(data), seen.append)
    stream.seek(0, io.SEEK_END)
    assert stream.read(10) == b""  # a read at the end after the size probe
    stream.seek(len(data) - 100)
    stream.read(100)  # the tail, read out of order
    assert max(seen, default=0) == 0
    stream.seek(0)
    stream.read(len(data) // 2)
    assert seen[-1] in (49, 50)
    stream.seek(0)
    assert b"".join(stream) == data
    assert seen == sorted(seen) and seen[-1] == 100


# --- a real worker killed in every phase (issue 20 acceptance 5) -----------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("phase", tasks.PHASES)
def test_a_worker_killed_in_any_phase_of_an_import_leaves_a_job_that_finishes(
        phase, personas, settings):
    """issue 20 acceptance 5: a real `db_worker` is SIGKILLed when the job's row says it is in
    `phase` (each phase the import declares), a new worker starts, and the page the uploader
    watches settles the dead attempt: the job finishes with exactly one stored session, its
    list figures and no upload left; the dead attempt's task row says its worker was lost."""
    from django.urls import reverse
    from django_tasks_db.models import DBTaskResult

    from tests.web import workers

    settings.CTXSIM_IMPORT_TIMEOUT_SECONDS = 2
    env = workers.worker_env(settings, CTXSIM_IMPORT_TIMEOUT_SECONDS="2",
                             CTXSIM_BACKGROUND_IMPORT_BYTES="1000")
    job = services.queue_import(upload("big.jsonl", claude_code_bytes(8)), team=personas.team,
                                user=personas.users["owner"])
    name = job.stored_name
    with workers.running(env, stop_at=phase) as first:
        workers.wait_for(lambda: ImportJob.objects.filter(
            pk=job.pk, status=ImportJob.Status.RUNNING, message=phase).exists(), 120,
            f"the job to reach {phase!r}", first)
        workers.kill(first)
    client = personas.client("owner")
    url = reverse("import-job", args=[job.pk])

    def settled():
        client.get(url, headers={"HX-Request": "true"})  # the page settles a stuck job
        row = ImportJob.objects.get(pk=job.pk)
        return row if row.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED) else None

    with workers.running(env) as second:
        job = workers.wait_for(settled, 120, "the job to finish", second)
        # The job's row says done inside the retry; the worker records its task's end just
        # after it returns. Leaving the block kills the worker, so wait for that record.
        workers.wait_for(lambda: not DBTaskResult.objects.filter(status="RUNNING").exists(),
                         60, "the worker to record the end of its task", second)
    assert job.status == ImportJob.Status.DONE, job.message
    (session,) = Session.objects.filter(team=personas.team)
    assert job.session_ids == [session.pk]
    assert session.peak_sent_tokens > 0  # the list figures
    assert job.stored_name == "" and not default_storage.exists(name)
    assert not DBTaskResult.objects.filter(status="RUNNING").exists()
    (lost,) = DBTaskResult.objects.filter(status="FAILED")
    assert lost.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 1
