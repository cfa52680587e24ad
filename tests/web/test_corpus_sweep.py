"""Corpus sweeps (SPEC §13): a sweep's grid over the filtered sessions, one worker task per
session, summed into one Pareto front of total cost against information lost."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.generator import generate_session
from ctxsim.insights import sweep as sweeps
from ctxsim.jobs.models import Job
from ctxsim.overview.corpus import pareto_front
from ctxsim.overview.models import CorpusSweep, CorpusSweepPart, Status
from ctxsim.overview.tasks import run_corpus_part_job
from ctxsim.replays.models import SavedProfile
from ctxsim.replays.state import settings_from_query
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

GRID = {"profiles": "aivax", "param1": "toolContextCount", "start1": "1", "stop1": "3",
        "step1": "1", "param2": "contextMaximumSize", "start2": "6000", "stop2": "10000",
        "step2": "2000", "model": "gpt-5"}


def corpus(personas, n, calls=5, title="fleet"):
    sessions = [replace(generate_session(calls + i % 4, seed=i, oversize_every=2),
                        title=f"{title} {i}") for i in range(n)]
    return save_sessions(sessions, team=personas.team, user=personas.users["owner"])


def run_worker():
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay",
                 "--no-reload", verbosity=0)


def create(personas, persona="reviewer", **extra):
    return personas.client(persona).post(reverse("corpus-sweep-create"), {**GRID, **extra})


# db_worker closes its database connection after a task, which would break PostgreSQL's test
# transaction: this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_nine_points_over_fifty_sessions_complete_on_the_worker_and_apply_as_profiles(
    personas, settings
):
    # The viewer opens the overview of every point on the front below, and no worker runs
    # what those queue: more than the usual quota of pending tasks (ctxsim/jobs/policy.py).
    settings.CTXSIM_PENDING_PER_USER = 100
    rows = corpus(personas, 50)
    response = create(personas)
    sweep = CorpusSweep.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("corpus-sweep-detail", args=[sweep.pk])
    assert sweep.total == 50 and sweep.parts.count() == 50
    tasks = DBTaskResult.objects.all()
    assert tasks.count() == 50 and {t.queue_name for t in tasks} == {"sweeps"}
    polled = personas.client("viewer").get(
        response["Location"], headers={"HX-Request": "true", "HX-Target": "div#corpus-status"})
    body = polled.content.decode()
    assert body.lstrip().startswith('<div id="corpus-status"') and "every 1s" in body
    job = Job.objects.get(kind="corpus", counted=True)  # the part the quota counts
    assert f'hx-get="{reverse("job-poll", args=[job.pk])}"' in body
    assert "0 of 50 sessions swept" in body

    run_worker()
    sweep.refresh_from_db()
    assert sweep.status == Status.DONE and len(sweep.points) == 9
    assert sweep.parts.filter(status=Status.DONE).count() == 50
    # Each point is the sum of the sessions' own sweep points.
    parts = [p.points for p in sweep.parts.all()]
    for i, point in enumerate(sweep.points):
        assert point["sent_tokens"] == sum(p[i]["sent_tokens"] for p in parts)
        assert point["cost"] == pytest.approx(sum(p[i]["cost"] for p in parts))
        assert point["lost"] == sum(p[i]["lost_references"] + p[i]["rereads"] for p in parts)
    # ... and one session's share is what the per-session sweep finds for it.
    one = sweep.parts.get(session=rows[7])
    settings, _ = settings_from_query({"profile": "aivax"}, personas.team)
    from ctxsim.analysis.choices import CacheChoice
    from ctxsim.replays.services import canonical_session

    canonical = canonical_session(rows[7])
    source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                               settings.config, canonical.tools, canonical.response_schema)
    alone = sweeps.evaluate(source, sweep.points[4]["values"], CacheChoice(model="gpt-5").rule())
    assert one.points[4]["sent_tokens"] == alone.sent_tokens

    front = [p for p in sweep.points if p["front"]]
    assert front
    expected = pareto_front([(p["cost"], p["lost"]) for p in sweep.points])
    assert [i for i, p in enumerate(sweep.points) if p["front"]] == expected

    page = personas.client("viewer").get(response["Location"]).content.decode()
    assert 'id="corpus-chart-data"' in page and "every 1s" not in page
    assert page.count('class="front"') == len(front)
    assert 'name="point"' not in page  # a viewer cannot save profiles

    for n, point in enumerate(sweep.points):
        if not point["front"]:
            continue
        saved_response = personas.client("reviewer").post(
            reverse("corpus-sweep-apply", args=[sweep.pk]),
            {"point": str(n), "name": f"fleet point {n}"})
        assert saved_response.status_code == 302
        saved = SavedProfile.objects.get(team=personas.team, name=f"fleet point {n}")
        assert f"profiles={saved.ref.replace(':', '%3A')}" in saved_response["Location"]
        assert saved.base == "aivax"
        applied, errors = settings_from_query({"profile": saved.ref}, personas.team)
        assert not errors
        rc = applied.run_config().values
        for name, value in point["values"].items():
            assert rc[name] == value
        # The saved profile opens in the overview of the same sessions.
        overview = personas.client("viewer").get(saved_response["Location"])
        assert overview.status_code == 200
        assert overview.context["overview"].sessions == 50
        assert [c.ref for c in overview.context["overview"].columns] == [saved.ref, "aivax"]


def test_a_cancelled_sweep_runs_none_of_its_queued_parts(personas):
    corpus(personas, 4)
    create(personas)
    sweep = CorpusSweep.objects.get()
    assert personas.client("viewer").post(
        reverse("corpus-sweep-cancel", args=[sweep.pk])).status_code == 403
    response = personas.client("reviewer").post(reverse("corpus-sweep-cancel", args=[sweep.pk]))
    assert response.status_code == 302
    for part in sweep.parts.all():
        assert run_corpus_part_job(part.pk) == {"status": "skipped"}
    sweep.refresh_from_db()
    assert sweep.status == Status.CANCELLED and sweep.points == []
    assert set(sweep.parts.values_list("status", flat=True)) == {Status.CANCELLED}
    page = personas.client("viewer").get(reverse("corpus-sweep-detail", args=[sweep.pk]))
    assert "was cancelled" in page.content.decode()


def test_the_last_part_sums_the_sweep_and_a_failed_part_is_reported(personas, monkeypatch):
    corpus(personas, 3)
    create(personas)
    sweep = CorpusSweep.objects.get()
    parts = list(sweep.parts.order_by("pk"))

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("ctxsim.overview.tasks.sweeps.SweepInput", broken)
    run_corpus_part_job(parts[0].pk)
    monkeypatch.undo()
    run_corpus_part_job(parts[1].pk)
    sweep.refresh_from_db()
    assert sweep.status == Status.RUNNING
    run_corpus_part_job(parts[2].pk)
    sweep.refresh_from_db()
    assert sweep.status == Status.DONE and "1 of 3 sessions failed" in sweep.message
    assert all(p["sessions"] == 2 for p in sweep.points)


def test_bad_axes_and_empty_names_are_reported(personas):
    corpus(personas, 2)
    response = create(personas, step1="0")
    assert response.status_code == 400 and "positive whole number" in response.content.decode()
    assert not CorpusSweep.objects.exists()
    create(personas)
    sweep = CorpusSweep.objects.get()
    for part in sweep.parts.all():
        run_corpus_part_job(part.pk)
    page = personas.client("viewer").get(reverse("corpus-sweep-detail", args=[sweep.pk]))
    link = page.context["points"][4]["overview"]
    assert page.content.decode().count('class="point-overview"') == 9
    overview = personas.client("viewer").get(link).context["overview"]
    assert [c.ref for c in overview.columns] == ["current", "aivax"]
    assert overview.columns[0].label == "aivax (contextMaximumSize=8000, toolContextCount=2)"
    empty = personas.client("reviewer").post(reverse("corpus-sweep-apply", args=[sweep.pk]),
                                             {"point": "0", "name": ""})
    assert empty.status_code == 400 and "give the profile a name" in empty.content.decode()
    builtin = personas.client("reviewer").post(reverse("corpus-sweep-apply", args=[sweep.pk]),
                                               {"point": "0", "name": "chatcli"})
    assert builtin.status_code == 400
    far = personas.client("reviewer").post(reverse("corpus-sweep-apply", args=[sweep.pk]),
                                           {"point": "99", "name": "x"})
    assert far.status_code == 400 and "no such point" in far.content.decode()


def test_filters_choose_the_sessions_and_viewers_cannot_start_one(personas):
    corpus(personas, 3, title="alpha")
    corpus(personas, 2, title="beta")
    create(personas, q="beta")
    sweep = CorpusSweep.objects.get()
    assert sweep.total == 2 and sweep.filters == "q=beta"
    assert create(personas, persona="viewer").status_code == 403
    assert personas.client("outsider").get(
        reverse("corpus-sweep-detail", args=[sweep.pk])).status_code == 404
    form = personas.client("viewer").get(reverse("corpus-sweeps") + "?q=beta&profiles=aivax")
    assert form.status_code == 200 and "read-only" in form.content.decode()
    assert CorpusSweepPart.objects.count() == 2


def test_a_part_whose_worker_went_away_is_queued_again(personas, settings):
    from datetime import timedelta

    from django.utils import timezone

    corpus(personas, 2)
    create(personas)
    sweep = CorpusSweep.objects.get()
    first, second = sweep.parts.order_by("pk")
    long_ago = timezone.now() - timedelta(seconds=settings.CTXSIM_IMPORT_TIMEOUT_SECONDS + 5)
    CorpusSweepPart.objects.filter(pk=first.pk).update(status=Status.RUNNING,
                                                       started_at=long_ago)
    lost = DBTaskResult.objects.get(args_kwargs__args=[first.pk])
    DBTaskResult.objects.filter(pk=lost.pk).update(status="RUNNING")  # as its worker left it
    personas.client("viewer").get(reverse("corpus-sweep-detail", args=[sweep.pk]))
    first.refresh_from_db()
    assert first.status == Status.QUEUED and DBTaskResult.objects.count() == 3
    lost.refresh_from_db()  # the lost part's task is settled too (issue 30)
    assert lost.status == "FAILED" and lost.exception_class_path.endswith("WorkerLost")
    run_corpus_part_job(first.pk)
    run_corpus_part_job(second.pk)
    sweep.refresh_from_db()
    assert sweep.status == Status.DONE and all(p["sessions"] == 2 for p in sweep.points)
