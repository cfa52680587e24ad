"""The migrations of the one store (issue 30) carry today's rows forward: the overview's
`SessionFigures` move into `analysis.SessionResult` (beside the insights result of the same
settings and rule), a corpus sweep's parts become jobs (queued part tasks given the new ids),
and the bare jobs that stood for the old overview tasks end.

Run forward only, as in a deploy, on a database of its own (as tests/web/test_job_migration.py).
"""

from __future__ import annotations

import datetime as dt
import os

BEFORE = [("jobs", "0004_tickets_are_jobs"), ("analysis", "0006_insightsjob_on_job"),
          ("overview", "0003_move_background_replay"),
          ("replays", "0005_backgroundreplay_on_job"), ("transcripts", "0010_drop_old_importjob"),
          ("teams", "0003_redaction")]
AFTER = [("jobs", "0005_job_counted"), ("analysis", "0008_carry_session_figures"),
         ("overview", "0004_jobs_and_one_store")]
WHEN = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)

from tests.web.test_job_migration import _migrate, run_as_script  # noqa: E402


def test_figures_and_corpus_parts_move_into_the_one_store_and_onto_jobs(tmp_path):
    run_as_script("tests.web.test_store_migration", tmp_path)


def carry_and_check() -> None:
    from importlib import import_module

    from django.http import QueryDict

    from ctxsim.analysis.choices import cache_choice
    from ctxsim.analysis.results import rule_key
    from ctxsim.replays.state import settings_from_query
    from ctxsim.teams.models import Team

    carried = import_module("ctxsim.analysis.migrations.0008_carry_session_figures")
    old = _migrate(BEFORE)
    team = old.get_model("teams", "Team").objects.create(name="alpha", slug="alpha")
    user = old.get_model("auth", "User").objects.create(username="ann")
    sessions = old.get_model("transcripts", "Session").objects
    one, two, three = (sessions.create(team=team, title=t, format="chatcli") for t in "abc")
    cache = cache_choice(QueryDict("model=gpt-5"))[0]
    rule = cache.rule()
    runs = {ref: settings_from_query({"profile": ref}, Team(pk=team.pk))[0]
            for ref in ("none", "chatcli")}
    key = {ref: carried.old_key(s.key, rule) for ref, s in runs.items()}
    figures = old.get_model("overview", "SessionFigures").objects
    figures.create(session=one, key=key["none"], query="profile=none", cache=cache.as_dict(),
                   status="done", figures={"sessions": 1, "sent_tokens": 7})
    figures.create(session=two, key=key["none"], query="profile=none", cache=cache.as_dict(),
                   status="failed", message="RuntimeError: boom")
    figures.create(session=three, key=key["none"], query="profile=none",
                   cache=cache.as_dict(), status="running", started_at=WHEN)  # not carried
    figures.create(session=one, key="f" * 64, query="profile=chatcli", cache=cache.as_dict(),
                   status="done", figures={"old": True})  # an older version's key: unread
    old.get_model("analysis", "InsightsResult").objects.create(
        session=one, key=runs["none"].key, rule=rule_key(rule), data={"version": 1})
    jobs = old.get_model("jobs", "Job").objects
    jobs.create(kind="overview", queue="replays", team=team, user=user, task_id="t1")
    sweep = old.get_model("overview", "CorpusSweep").objects.create(
        team=team, created_by=user, axes=[], cache=cache.as_dict(), status="running", total=2)
    parts = old.get_model("overview", "CorpusSweepPart").objects
    parts.create(sweep=sweep, session=one, status="done", points=[{"cost": 1.0}])
    queued = parts.create(sweep=sweep, session=two, status="queued")
    task = old.get_model("django_tasks_database", "DBTaskResult").objects.create(
        task_path="ctxsim.overview.tasks.run_corpus_part",
        args_kwargs={"args": [queued.pk], "kwargs": {}}, queue_name="sweeps",
        backend_name="default", status="READY", run_after=dt.datetime(9999, 1, 1, tzinfo=dt.UTC))

    new = _migrate(AFTER)
    store = new.get_model("analysis", "SessionResult").objects
    assert store.count() == 2  # the done row joined the insights row; the failed one
    first = store.get(session_id=one.pk)
    assert (first.key, first.rule, first.data, first.figures, first.figures_version) == (
        runs["none"].key, rule_key(rule), {"version": 1}, {"sessions": 1, "sent_tokens": 7},
        3)
    failed = store.get(session_id=two.pk)
    assert (failed.figures, failed.message, failed.data) == (None, "RuntimeError: boom", None)
    life = new.get_model("jobs", "Job").objects
    assert life.get(task_id="t1").status == "cancelled"
    moved = {p.session_id: p for p in new.get_model("overview", "CorpusSweepPart").objects.all()}
    assert set(moved) == {one.pk, two.pk}
    assert moved[one.pk].points == [{"cost": 1.0}] and moved[one.pk].corpus_id == sweep.pk
    part = life.get(pk=moved[two.pk].pk)
    assert (part.kind, part.queue, part.status, part.team_id, part.counted) == (
        "corpus", "sweeps", "queued", team.pk, False)
    assert life.get(pk=moved[one.pk].pk).status == "done"
    assert new.get_model("django_tasks_database", "DBTaskResult").objects.get(
        pk=task.pk).args_kwargs["args"] == [moved[two.pk].pk]


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxsim.settings")
    import django

    django.setup()
    carry_and_check()
    print("carried")
