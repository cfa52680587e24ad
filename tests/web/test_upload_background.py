"""Large uploads go to the background worker: stored file, job row, progress, stuck jobs."""

from __future__ import annotations

import io
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings as django_settings
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from ctxsim.transcripts import services, tasks
from ctxsim.transcripts.models import Content, ImportJob, Message, Session
from tests.factories import claude_code_bytes, row_counts, upload

pytestmark = pytest.mark.django_db

IMMEDIATE = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
                         "QUEUES": ["default", *django_settings.TASK_QUEUES]}}


@pytest.fixture(autouse=True)
def small_background_threshold(settings, tmp_path):
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 1000
    settings.MEDIA_ROOT = tmp_path / "media"


def post_large(client, data: bytes | None = None, name: str = "large.jsonl", **extra):
    data = claude_code_bytes(8) if data is None else data
    return client.post(reverse("upload"), {"files": [upload(name, data)], **extra}, follow=True)


def test_a_large_file_is_queued_for_the_worker(personas, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_large(personas.client("owner"))
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.QUEUED
    assert job.team == personas.team and job.user == personas.users["owner"]
    assert job.file_name == "large.jsonl"
    assert default_storage.exists(job.stored_name)
    assert job.stored_name.startswith("uploads/")
    assert not Session.objects.exists()
    task = DBTaskResult.objects.get()
    assert task.args_kwargs["args"] == [job.pk, 0]
    assert ImportJob.objects.get().task_id == str(task.id)
    body = response.content.decode()
    assert f'id="import-job-{job.pk}"' in body
    assert 'hx-trigger="every 1s"' in body
    assert f'hx-get="{reverse("job-poll", args=[job.pk])}"' in body  # its job's poll
    assert "<progress" in body


# The real db_worker closes its database connections after each task; inside a test
# transaction that would break PostgreSQL's connection, so these tests commit for real.
worker_test = pytest.mark.django_db(transaction=True)


@worker_test
def test_the_worker_imports_the_job_and_the_page_links_the_sessions(
    personas, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post_large(personas.client("owner"))
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay", "--no-reload",
                 verbosity=0)
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.DONE, job.message
    assert job.progress == 100
    session = Session.objects.get()
    assert job.session_ids == [session.pk]
    assert session.team == personas.team and session.source_name == "large.jsonl"
    # The stored upload is deleted once its sessions exist.
    assert job.stored_name == ""
    partial = personas.client("viewer").get(
        reverse("import-job", args=[job.pk]), headers={"HX-Request": "true"}
    )
    body = partial.content.decode()
    assert "every 1s" not in body  # polling stops
    assert reverse("session-detail", args=[session.pk]) in body
    assert "<html" not in body


@override_settings(TASKS=IMMEDIATE)
def test_with_the_immediate_backend_the_job_is_done_when_the_page_answers(
    personas, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post_large(personas.client("owner"))
    assert ImportJob.objects.get().status == ImportJob.Status.DONE
    assert Session.objects.count() == 1


@override_settings(TASKS=IMMEDIATE)
def test_a_failed_background_import_shows_its_message_and_stores_nothing(
    personas, django_capture_on_commit_callbacks
):
    before = row_counts()
    with django_capture_on_commit_callbacks(execute=True):
        post_large(personas.client("owner"), data=b'{"hello": "world"}' + b" " * 2000)
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.FAILED
    assert job.message.startswith("unknown transcript format")
    # The importer's answer would be the same on a retry: the upload is deleted with it.
    assert job.stored_name == "" and not job.can_requeue
    after = row_counts()
    assert {k: after[k] - before[k] for k in after} == {
        "Session": 0, "Message": 0, "Content": 0, "ImportJob": 1
    }
    page = personas.client("owner").get(reverse("upload")).content.decode()
    assert "unknown transcript format" in page
    assert reverse("import-job-requeue", args=[job.pk]) not in page


def test_the_job_page_works_without_javascript(personas, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_large(personas.client("owner"))
    job = ImportJob.objects.get()
    page = personas.client("viewer").get(reverse("import-job", args=[job.pk]))
    body = page.content.decode()
    assert "<html" in body and "<noscript>" in body
    assert 'value="0"' in body


def test_an_outsider_gets_404_for_a_job_and_its_requeue(personas):
    job = ImportJob.objects.create(
        team=personas.team, file_name="x.jsonl", size=10, status=ImportJob.Status.FAILED
    )
    client = personas.client("outsider")
    assert client.get(reverse("import-job", args=[job.pk])).status_code == 404
    assert client.post(reverse("import-job-requeue", args=[job.pk])).status_code == 404


def test_progress_follows_the_bytes_the_importer_reads():
    seen = []
    data = claude_code_bytes(20)
    stream = tasks.ProgressStream(io.BytesIO(data), len(data), seen.append)
    assert stream.read(100) == data[:100]
    stream.seek(0)
    lines = list(stream)
    assert b"".join(lines) == data
    assert seen == sorted(seen)
    assert seen[-1] == 100


def test_progress_writes_are_throttled(personas, monkeypatch):
    job = ImportJob.objects.create(
        team=personas.team, file_name="x", size=10, status=ImportJob.Status.RUNNING
    )
    clock = [1000.0]
    monkeypatch.setattr(tasks.time, "monotonic", lambda: clock[0])
    writes = []
    reporter = tasks.JobReporter(job)
    monkeypatch.setattr(
        tasks.ImportJob.objects, "filter",
        lambda **kw: type("Q", (), {"update": lambda self, **f: writes.append(f) or 1})(),
    )
    reporter.update(0, force=True)
    for _ in range(10):
        reporter.update(0)  # no movement: nothing to write
    reporter.update(2)  # two points: written at once
    clock[0] += 0.1
    reporter.update(3)  # one point, too soon
    clock[0] += 0.5
    reporter.update(3)  # one point, half a second later
    assert [w["done"] for w in writes] == [0, 2, 3]


def test_a_worker_killed_mid_import_leaves_no_half_session(
    personas, monkeypatch, django_capture_on_commit_callbacks
):
    from ctxsim.transcripts import store

    with django_capture_on_commit_callbacks(execute=True):
        post_large(personas.client("owner"))
    job = ImportJob.objects.get()
    real = store.insert_rows

    def killed(model, *args, **kwargs):
        real(model, *args, **kwargs)
        if model is store.Message:
            raise KeyboardInterrupt  # the worker receives SIGINT in the middle of a write

    monkeypatch.setattr(store, "insert_rows", killed)
    before = row_counts()
    with pytest.raises(KeyboardInterrupt):
        services.run_import_job(job.pk, 0)
    assert {k: v for k, v in row_counts().items() if k != "ImportJob"} == {
        k: v for k, v in before.items() if k != "ImportJob"
    }
    assert ImportJob.objects.get().status == ImportJob.Status.RUNNING


def _running_job(team, *, seconds_ago: int, attempts: int = 1) -> ImportJob:
    """A running job; by default one already queued again once after its worker died (the
    next stuck check settles it as failed)."""
    stamp = timezone.now() - timedelta(seconds=seconds_ago)
    job = ImportJob.objects.create(
        team=team, file_name="stuck.jsonl", size=5000, status=ImportJob.Status.RUNNING,
        stored_name=default_storage.save("uploads/stuck.upload", io.BytesIO(claude_code_bytes(4))),
        attempts=attempts,
    )
    ImportJob.objects.filter(pk=job.pk).update(started_at=stamp, heartbeat_at=stamp)
    return job


def test_a_job_without_heartbeat_past_the_timeout_is_marked_failed(personas):
    stuck = _running_job(personas.team, seconds_ago=601)
    alive = _running_job(personas.team, seconds_ago=30)
    assert services.fail_stuck_jobs() == 1
    stuck.refresh_from_db()
    alive.refresh_from_db()
    assert stuck.status == ImportJob.Status.FAILED
    assert "upload the file again" in stuck.message
    # Settled as failed, nothing will read its upload again (issue 20 item 11).
    assert stuck.stored_name == "" and not default_storage.exists("uploads/stuck.upload")
    assert alive.status == ImportJob.Status.RUNNING and default_storage.exists(alive.stored_name)


@override_settings(CTXSIM_IMPORT_TIMEOUT_SECONDS=10)
def test_the_timeout_is_a_setting(personas):
    _running_job(personas.team, seconds_ago=30)
    assert services.fail_stuck_jobs() == 1


def test_the_check_command_marks_stuck_jobs(personas):
    _running_job(personas.team, seconds_ago=3600)
    out = StringIO()
    call_command("check_stuck_imports", stdout=out)
    assert "1 stuck import" in out.getvalue()
    assert ImportJob.objects.get().status == ImportJob.Status.FAILED


def test_opening_the_upload_page_runs_the_check_and_says_what_happened(personas):
    job = _running_job(personas.team, seconds_ago=3600)
    body = personas.client("owner").get(reverse("upload")).content.decode()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.FAILED
    assert "stopped without finishing" in body and "upload the file again" in body
    assert reverse("import-job-requeue", args=[job.pk]) not in body  # its upload is gone


def test_polling_a_job_runs_the_check(personas):
    job = _running_job(personas.team, seconds_ago=3600)
    body = personas.client("owner").get(
        reverse("import-job", args=[job.pk]), headers={"HX-Request": "true"}
    ).content.decode()
    assert "stopped without finishing" in body
    assert "every 1s" not in body


@worker_test
def test_a_job_whose_worker_died_is_queued_again_once_and_succeeds(
        personas, django_capture_on_commit_callbacks):
    """issue 20 item 11: a worker restarted mid-import leaves a job that finishes, its upload
    kept for the retry."""
    job = _running_job(personas.team, seconds_ago=3600, attempts=0)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.fail_stuck_jobs() == 1
    job.refresh_from_db()
    assert job.status == ImportJob.Status.QUEUED and job.attempts == 1
    assert "queued again" in job.message and default_storage.exists(job.stored_name)
    task = DBTaskResult.objects.get()
    assert task.args_kwargs["args"] == [job.pk, 1]
    page = personas.client("owner").get(reverse("import-job", args=[job.pk])).content.decode()
    assert "waiting for the worker — the worker stopped while importing" in page
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay", "--no-reload",
                 verbosity=0)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE
    assert Session.objects.filter(pk__in=job.session_ids).count() == 1


def test_the_task_row_of_a_dead_worker_is_settled_with_its_job(personas):
    """issue 20 item 11: the task backend's row of a killed worker's task stayed RUNNING while
    the job it ran was settled."""
    job = _running_job(personas.team, seconds_ago=3600)
    task = DBTaskResult.objects.create(
        status="RUNNING", args_kwargs={"args": [job.pk, 1], "kwargs": {}},
        task_path="ctxsim.transcripts.tasks.run_import", queue_name="imports",
        backend_name="default", run_after=timezone.now(), started_at=timezone.now())
    other = DBTaskResult.objects.create(
        status="RUNNING", args_kwargs={"args": [0, 0], "kwargs": {}},
        task_path="ctxsim.transcripts.tasks.run_import", queue_name="imports",
        backend_name="default", run_after=timezone.now(), started_at=timezone.now())
    ImportJob.objects.filter(pk=job.pk).update(task_id=str(task.pk))
    services.fail_stuck_jobs()
    task.refresh_from_db()
    other.refresh_from_db()
    assert task.status == "FAILED" and task.finished_at is not None
    assert task.exception_class_path == "ctxsim.heartbeat.WorkerLost"
    assert "no heartbeat" in task.traceback
    assert other.status == "RUNNING"  # another job's task, still running for all we know


def test_a_stale_task_of_an_earlier_attempt_does_nothing(personas):
    job = _running_job(personas.team, seconds_ago=3600)
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.QUEUED, attempts=2)
    assert services.run_import_job(job.pk, 1)["status"] == "skipped"
    assert ImportJob.objects.get().status == ImportJob.Status.QUEUED


def test_a_viewer_may_not_requeue(personas):
    job = _running_job(personas.team, seconds_ago=3600)
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.FAILED)  # file kept
    assert personas.client("viewer").post(
        reverse("import-job-requeue", args=[job.pk])
    ).status_code == 403
    assert ImportJob.objects.get().status == ImportJob.Status.FAILED


def test_only_failed_jobs_can_be_requeued(personas):
    job = _running_job(personas.team, seconds_ago=5)
    response = personas.client("owner").post(
        reverse("import-job-requeue", args=[job.pk]), follow=True
    )
    assert "only failed imports can be re-queued" in response.content.decode()
    assert ImportJob.objects.get().status == ImportJob.Status.RUNNING


def test_rows_of_other_models_are_untouched_by_the_check(personas):
    _running_job(personas.team, seconds_ago=3600)
    before = {m.__name__: m.objects.count() for m in (Session, Message, Content)}
    services.fail_stuck_jobs()
    assert {m.__name__: m.objects.count() for m in (Session, Message, Content)} == before
