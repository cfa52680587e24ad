"""Issue 28 item 1, acceptance 2: with real workers (`manage.py ctxsim_worker`, one per
queue as `make run` starts them), a viewer's 20 overview GETs with new thresholds queue at
most 4 tasks — the others are refused with a 429, a Retry-After and why — and an import of
another team submitted meanwhile finishes within twice its time on an idle worker."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.generator import generate_session
from ctxsim.overview.models import ColumnTask, Status
from ctxsim.transcripts import services
from ctxsim.transcripts.models import ImportJob
from ctxsim.transcripts.store import save_sessions
from tests.factories import claude_code_bytes, upload
from tests.web import workers

pytestmark = pytest.mark.django_db(transaction=True)

# What polling for the end adds to a measured time (the test polls every 0.05 s, the worker
# the queue every 0.1 s).
POLL_SLACK = 0.3


def timed_import(personas) -> float:
    """Seconds from queuing another team's import until its job says done."""
    started = time.monotonic()
    job = services.queue_import(upload("other.jsonl", claude_code_bytes(60)),
                                team=personas.other_team, user=personas.users["outsider"])
    workers.wait_for(lambda: ImportJob.objects.filter(
        pk=job.pk, status__in=(ImportJob.Status.DONE, ImportJob.Status.FAILED)).exists(),
        300, "the import to finish")
    elapsed = time.monotonic() - started
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE, job.message
    return elapsed


def test_a_viewers_overview_storm_queues_four_tasks_and_delays_no_import(personas, settings,
                                                                         tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 1000
    save_sessions([generate_session(400, seed=n) for n in range(3)], team=personas.team,
                  user=personas.users["owner"])
    env = workers.worker_env(settings)
    with workers.running(env, queues="imports,default", command_name="ctxsim_worker") as imp:
        timed_import(personas)  # the worker's first import loads what every import needs
        idle = timed_import(personas)
        with workers.running(env, queues="replays", command_name="ctxsim_worker") as replays:
            viewer = personas.client("viewer")
            answers = [viewer.get(reverse("team-overview"), {
                "profile": "chatcli", "env.CHATCLI_TOOL_RESULT_MAX_CHARS": str(2000 + n)})
                for n in range(20)]
            queued = DBTaskResult.objects.filter(queue_name="replays").count()
            assert queued <= 4, queued
            refused = [a for a in answers if a.status_code == 429]
            assert refused and all(a.status_code in (200, 429) for a in answers)
            assert refused[0]["Retry-After"].isdigit()
            assert "at most 4 per user" in refused[0].content.decode()
            workers.wait_for(lambda: ColumnTask.objects.filter(
                status=Status.RUNNING).exists(), 60, "the replays worker to be busy", replays)
            busy = timed_import(personas)
            assert ColumnTask.objects.filter(
                status__in=(Status.QUEUED, Status.RUNNING)).exists(), "the storm was over"
            assert replays.poll() is None and imp.poll() is None
    print(f"import: {idle:.2f} s idle, {busy:.2f} s during the storm")
    assert busy <= 2 * idle + POLL_SLACK, (busy, idle)
