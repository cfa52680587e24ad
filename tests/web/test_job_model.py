"""Issue 30: every kind of job is one `jobs.Job` row with its payload beside it; a kind's
conditional update is one write that only the first of two claimants wins; the quotas count
pending jobs of every kind; a job whose task's process died is settled at once."""

from __future__ import annotations

import pytest
from django.utils import timezone

from ctxsim.analysis.models import Sweep
from ctxsim.jobs import lifecycle, policy
from ctxsim.jobs.models import Job, Status
from ctxsim.overview.models import ColumnTask
from ctxsim.replays.models import BackgroundReplay
from ctxsim.transcripts.models import ImportJob

pytestmark = pytest.mark.django_db


def test_every_kind_is_a_job_with_its_owner_kind_and_queue(personas, long_session):
    viewer = personas.users["viewer"]
    sweep = Sweep.objects.create(session=long_session, axes=[], cache={}, user=viewer)
    replay = BackgroundReplay.objects.create(session=long_session, key="k", query="")
    upload = ImportJob.objects.create(team=personas.team, file_name="a", size=1)
    rows = {job.pk: job for job in Job.objects.all()}
    assert {(rows[j.pk].kind, rows[j.pk].queue) for j in (sweep, replay, upload)} == {
        ("sweep", "sweeps"), ("replay", "replays"), ("import", "imports")}
    assert rows[sweep.pk].team_id == rows[replay.pk].team_id == personas.team.pk  # its session's
    assert rows[sweep.pk].user_id == viewer.pk


def test_a_claim_is_won_once_and_mixed_updates_write_both_tables(personas, long_session):
    replay = BackgroundReplay.objects.create(session=long_session, key="k", query="q")
    claim = BackgroundReplay.objects.filter(pk=replay.pk, status=Status.QUEUED)
    assert claim.update(status=Status.RUNNING, started_at=timezone.now()) == 1
    assert claim.update(status=Status.RUNNING, started_at=timezone.now()) == 0  # taken
    running = BackgroundReplay.objects.filter(pk=replay.pk, status=Status.RUNNING)
    assert running.update(done=5, query="changed") == 1
    replay.refresh_from_db()
    assert (replay.done, replay.query) == (5, "changed")
    assert BackgroundReplay.objects.filter(pk=replay.pk, key="other").update(done=9) == 0


def test_the_quotas_count_pending_jobs_of_every_kind_but_imports(personas, long_session):
    viewer = personas.users["viewer"]
    Sweep.objects.create(session=long_session, axes=[], cache={}, user=viewer)
    BackgroundReplay.objects.create(session=long_session, key="k", query="", user=viewer,
                                    status=Status.DONE)  # ended: counted no more
    ImportJob.objects.create(team=personas.team, user=viewer, file_name="a", size=1)
    column = ColumnTask.objects.create(user=viewer, team=personas.team, key="k", rule="r",
                                       query="", cache={})
    ColumnTask.objects.create(user=viewer, team=personas.team, key="k", rule="r", query="",
                              cache={}, counted=False)  # its helper copy
    assert policy.pending(viewer) == 2  # the sweep and the overview column, counted once
    ColumnTask.objects.filter(pk=column.pk).update(status=Status.DONE)
    assert policy.pending(viewer) == 1


def test_a_job_whose_process_died_is_queued_again_at_once(personas, long_session):
    dead = "00000000-0000-0000-0000-000000000001"
    replay = BackgroundReplay.objects.create(
        session=long_session, key="k", query="profile=chatcli", status=Status.RUNNING,
        task_id=dead, heartbeat_at=timezone.now())
    assert lifecycle.task_lost(dead, "the task's process was killed") == 1
    replay.refresh_from_db()
    assert (replay.status, replay.attempts) == (Status.QUEUED, 1)
    assert "process was killed" in replay.message and replay.task_id not in ("", dead)
    # Lost again, it is failed, saying so.
    BackgroundReplay.objects.filter(pk=replay.pk).update(status=Status.RUNNING)
    replay.refresh_from_db()
    assert lifecycle.task_lost(replay.task_id, "killed again") == 1
    replay.refresh_from_db()
    assert replay.status == Status.FAILED and "killed again" in replay.message
