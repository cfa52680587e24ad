"""The migrations of issue 30 carry today's rows onto `jobs.Job`: every kind's lifecycle moves
to one row of `Job`, its payload stays beside it, import jobs keep their ids, and a queued
task naming an old sweep id is given the new one.

The migrations run forward only (as in a deploy), on a database of their own: this module,
run as a script on an empty SQLite file, migrates it to the state before issue 30, writes
rows of every kind the old way, then migrates to the end and checks them.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEFORE = [("django_tasks_database", "0021_conditional_partial_index_ordering"),
          ("jobs", "0001_initial"), ("transcripts", "0008_session_origin_and_upload_claim"),
          ("analysis", "0004_insights_job"), ("replays", "0004_background_replay")]
AFTER = [("jobs", "0004_tickets_are_jobs"), ("transcripts", "0010_drop_old_importjob"),
         ("analysis", "0006_insightsjob_on_job"), ("replays", "0005_backgroundreplay_on_job")]
WHEN = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def test_rows_of_every_kind_move_onto_jobs(tmp_path):
    run_as_script("tests.web.test_job_migration", tmp_path)


def run_as_script(module: str, tmp_path) -> None:
    """Run a migration test module as a script on a new SQLite file; it prints "carried"."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'old.sqlite3'}",
           "PYTHONPATH": str(ROOT)}
    env.pop("CACHE_URL", None)
    done = subprocess.run([sys.executable, "-m", module], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("carried")


def _migrate(targets):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def carry_and_check() -> None:
    old = _migrate(BEFORE)
    team = old.get_model("teams", "Team").objects.create(name="alpha", slug="alpha")
    user = old.get_model("auth", "User").objects.create(username="ann")
    session = old.get_model("transcripts", "Session").objects.create(
        team=team, title="s", format="chatcli")
    imports = old.get_model("transcripts", "ImportJob").objects
    first = imports.create(team=team, user=user, file_name="a.jsonl", size=3, status="running",
                           progress=42, attempts=1, task_id="t1", heartbeat_at=WHEN,
                           session_ids=[session.pk])
    imports.filter(pk=first.pk).update(created_at=WHEN)
    sweep = old.get_model("analysis", "Sweep").objects.create(
        session=session, created_by=user, axes=[{"name": "n", "values": [1, 2]}], cache={},
        status="done", done=2, total=2, points=[{"p": 1}], heartbeat_at=WHEN)
    replay = old.get_model("replays", "BackgroundReplay").objects.create(
        session=session, key="k" * 64, query="profile=none", status="queued", total=9)
    trace = old.get_model("jobs", "TraceFile").objects.create(
        session=session, key="k" * 64, summary=False, query="profile=none", status="failed",
        message="too large")
    insights = old.get_model("analysis", "InsightsJob").objects.create(
        session=session, key="k" * 64, rule="gpt-5", query="profile=none", cache={},
        status="running", started_at=WHEN)
    old.get_model("jobs", "Ticket").objects.create(kind="overview", user=user, team=team,
                                                   subject=f"team:{team.pk}", task_id="t9")
    task = old.get_model("django_tasks_database", "DBTaskResult").objects.create(
        task_path="ctxsim.analysis.tasks.run_sweep", args_kwargs={"args": [sweep.pk],
                                                                 "kwargs": {}},
        queue_name="sweeps", backend_name="default", status="READY",
        run_after=dt.datetime(9999, 1, 1, tzinfo=dt.UTC))

    new = _migrate(AFTER)
    jobs = new.get_model("jobs", "Job").objects
    assert jobs.count() == 6
    assert jobs.filter(kind="overview", task_id="t9", user_id=user.pk, status="queued").exists()
    moved = new.get_model("transcripts", "ImportJob").objects.get(pk=first.pk)  # same id
    assert (moved.file_name, moved.session_ids) == ("a.jsonl", [session.pk])
    life = jobs.get(pk=first.pk)
    assert (life.kind, life.queue, life.team_id, life.user_id, life.status, life.done,
            life.total, life.attempts, life.task_id, life.heartbeat_at, life.created_at) == (
        "import", "imports", team.pk, user.pk, "running", 42, 100, 1, "t1", WHEN, WHEN)
    new_sweep = new.get_model("analysis", "Sweep").objects.get()
    sweep_life = jobs.get(pk=new_sweep.pk)
    assert (sweep_life.kind, sweep_life.user_id, sweep_life.team_id, sweep_life.done,
            new_sweep.points) == ("sweep", user.pk, team.pk, 2, [{"p": 1}])
    assert new.get_model("django_tasks_database", "DBTaskResult").objects.get(
        pk=task.pk).args_kwargs["args"] == [new_sweep.pk]
    assert jobs.get(pk=new.get_model("replays", "BackgroundReplay").objects.get(
        key=replay.key).pk).total == 9
    trace_row = new.get_model("jobs", "TraceFile").objects.get()
    assert (trace_row.summary, jobs.get(pk=trace_row.pk).message) == (False, trace.message)
    column = new.get_model("analysis", "InsightsJob").objects.get()
    assert (column.rule, jobs.get(pk=column.pk).started_at) == (insights.rule, WHEN)
    # New jobs get ids after the kept ones (the sequence was moved past them).
    top = max(jobs.values_list("pk", flat=True))
    assert jobs.create(kind="import", team_id=team.pk).pk > top


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxsim.settings")
    import django

    django.setup()
    carry_and_check()
    print("carried")
