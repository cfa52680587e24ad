"""The worker's side of the overview and of corpus sweeps (run by `manage.py db_worker`).

- `compute_column(job_id)` (queue "replays"): one task of an overview column (a
  `ColumnTask` job), session by session; each `SessionResult` row, created when it was
  queued, is claimed by the job's attempt (`ctxsim.analysis.results.claim`) and then filled.
- `run_corpus_part(part_id)` (queue "sweeps"): a corpus sweep's grid over one session (a
  `CorpusSweepPart` job); the part that finishes last sums every part into the sweep's
  points and front.

Both run through `ctxsim.jobs.lifecycle.run` (claim, heartbeat, fail on any error); a worker
that died leaves its job to the lifecycle's settling, like every kind.

`enqueue_many` queues many tasks in bulk: an overview over 1,000 sessions and 4 profiles is
4,000 tasks, queued in a few inserts rather than one round trip each. `services` imports this
module; nothing here imports `services`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import QueryDict
from django.tasks import task
from django.tasks.base import Task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.analysis.models import SessionResult
from ctxsim.analysis.results import claim, store_figures
from ctxsim.insights import sweep as sweeps
from ctxsim.jobs import lifecycle
from ctxsim.jobs.models import PENDING, Job
from ctxsim.overview.figures import FIGURES_VERSION, session_figures
from ctxsim.overview.models import ColumnTask, CorpusSweep, CorpusSweepPart, Status
from ctxsim.replays import services as replays
from ctxsim.replays.cache import releases_memory
from ctxsim.replays.state import settings_from_query
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.tasks import import_timeout

logger = logging.getLogger(__name__)

BULK_BATCH = 500


SHARED_COLUMN_SESSIONS = 8


def shared_copies[K](columns: Mapping[K, list[int]]) -> list[tuple[K, list[int]]]:
    """The helper tasks of the columns: each column of at least `SHARED_COLUMN_SESSIONS`
    sessions is queued `CTXSIM_OVERVIEW_TASKS_PER_COLUMN` times, each copy starting at another
    point of its list, so that many workers share it (a row is claimed by one of them; the
    others skip it). One task per column left a second worker idle."""
    ways = settings.CTXSIM_OVERVIEW_TASKS_PER_COLUMN
    out = []
    for key, ids in columns.items():
        if len(ids) < SHARED_COLUMN_SESSIONS:
            continue
        for k in range(1, ways):
            at = k * len(ids) // ways
            out.append((key, ids[at:] + ids[:at]))
    return out


def enqueue_many(target: Task, arg_lists: Sequence[Sequence[Any]]) -> list[str]:
    """Queue `target` once per argument list. On the database backend the task rows are
    inserted in batches (what its `enqueue` would write, row for row, but without Django's
    `task_enqueued` signal per task, which only logs); on any other backend each is queued
    through `enqueue`. Returns the queued tasks' ids."""
    backend = target.get_backend()
    try:
        from django_tasks_db.backend import DatabaseBackend
        from django_tasks_db.models import DBTaskResult, get_date_max
    except ImportError:  # pragma: no cover - the database backend is a dependency
        DatabaseBackend = None  # noqa: N806
    if DatabaseBackend is None or not isinstance(backend, DatabaseBackend):
        return [str(target.enqueue(*args).id) for args in arg_lists]
    backend.validate_task(target)
    # bulk_create sends no pre_save, where the backend fills "no run_after" as "any time".
    run_after = target.run_after or get_date_max()
    rows = [
        DBTaskResult(
            id=backend._get_id(), args_kwargs={"args": list(args), "kwargs": {}},
            priority=target.priority, task_path=target.module_path,
            queue_name=target.queue_name, run_after=run_after,
            backend_name=backend.alias,
        )
        for args in arg_lists
    ]
    DBTaskResult.objects.bulk_create(rows, batch_size=BULK_BATCH)
    return [str(row.id) for row in rows]


HEARTBEAT_EVERY = 1.0


def timeout() -> timedelta:
    """An overview column task or a corpus sweep part silent this long lost its worker (the
    import timeout, as for the session page's background replays)."""
    return import_timeout()


@task(queue_name="replays")
@releases_memory
def compute_column(job_id: int) -> dict:
    """One overview column task: the figures of its sessions under one profile and cache
    rule, one after the other, each row claimed first (a row a helper copy claimed is left to
    it). One task per column a request queues, not per session (issue 28 item 1)."""
    return compute_column_job(job_id)


def compute_column_job(job_id: int) -> dict:
    return lifecycle.run(ColumnTask, _column, every=_every(), pk=job_id)


def _every() -> float:
    return min(HEARTBEAT_EVERY, timeout().total_seconds() / 4)


def _column(job: ColumnTask, attempt: lifecycle.Attempt) -> dict:
    rows = dict(SessionResult.objects.filter(key=job.key, rule=job.rule,
                                             session_id__in=job.sessions)
                .values_list("session_id", "pk"))
    outcomes: dict[str, int] = {}
    for n, session_id in enumerate(job.sessions):
        row_id = rows.get(session_id)
        status = "skipped" if row_id is None else compute_figures_job(job, row_id, session_id)
        outcomes[status] = outcomes.get(status, 0) + 1
        attempt.progress(n + 1)
    attempt.finish(Status.DONE, done=len(job.sessions))
    return outcomes


def compute_figures_job(job: ColumnTask, row_id: int, session_id: int) -> str:
    """One row of the column: claimed for this attempt, computed, stored (with the insights
    report the same replay gives)."""
    if not claim(row_id, job, FIGURES_VERSION):
        return "skipped"  # done already, or held by another copy that is still running
    session = Session.objects.select_related("team").get(pk=session_id)
    try:
        # The column's settings as the session's page takes them: a built-in agent profile in
        # the era of the release that wrote it (the row stays under the column's key).
        settings, _ = settings_from_query(QueryDict(job.query), session.team, session=session)
        cache, _ = cache_choice(job.cache | {"price": price_text(job.cache)})
        figures, data = session_figures(session, settings, cache)
    except Exception as exc:  # the row must say it failed, whatever went wrong
        logger.exception("overview figures of session %s failed", session.pk)
        store_figures(row_id, job, FIGURES_VERSION, None, f"{type(exc).__name__}: {exc}")
        return "failed"
    store_figures(row_id, job, FIGURES_VERSION, figures, data=data)
    return "done"


def enqueue_column(job: Job) -> None:
    """A column task's task (queued again after its worker was lost)."""
    result = compute_column.enqueue(job.pk)
    Job.objects.filter(pk=job.pk).update(task_id=str(result.id)[:64])


@task(queue_name="sweeps")
def run_corpus_part(part_id: int) -> dict:
    """A corpus sweep's grid over one of its sessions."""
    return run_corpus_part_job(part_id)


POINT_FIELDS = ("sent_tokens", "cost", "no_cache_cost", "lost_references", "rereads",
                "failed_calls")


def run_corpus_part_job(part_id: int) -> dict:
    part = CorpusSweepPart.objects.select_related("corpus__team", "session").filter(
        pk=part_id).first()
    if part is None or part.corpus.status not in (Status.QUEUED, Status.RUNNING):
        return {"status": "skipped"}  # cancelled, or the sweep is gone
    outcome = lifecycle.run(CorpusSweepPart, _part, every=_every(), pk=part_id)
    if outcome.get("status") == "failed":
        _finish_if_last(part.corpus_id)
    return outcome


def _part(part: CorpusSweepPart, attempt: lifecycle.Attempt) -> dict:
    sweep = part.corpus
    CorpusSweep.objects.filter(pk=sweep.pk, status=Status.QUEUED).update(status=Status.RUNNING)
    try:
        settings, _ = settings_from_query(QueryDict(sweep.query), sweep.team)
        cache, _ = cache_choice(sweep.cache | {"price": price_text(sweep.cache)})
        canonical = replays.canonical_session(part.session, settings.counter, other_counts=True)
        source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                                   settings.config, canonical.tools, canonical.response_schema,
                                   canonical.format, canonical.meta)
        axes = [sweeps.Axis(a["name"], tuple(a["values"])) for a in sweep.axes]
        rule = cache.rule()
        points = []
        for values in sweeps.grid(axes):
            point = sweeps.evaluate(source, values, rule)
            points.append({"error": point.error, "calls": part.session.model_call_count,
                           **{f: getattr(point, f) for f in POINT_FIELDS}})
            attempt.progress(len(points))
        status, message = Status.DONE, ""
    except Exception as exc:
        logger.exception("corpus sweep part %s failed", part.pk)
        points, status, message = [], Status.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    attempt.finish(status, message, points=points)
    _finish_if_last(sweep.pk)
    return {"status": status}


def enqueue_part(job: Job) -> None:
    """A corpus sweep part's task (queued again after its worker was lost)."""
    result = run_corpus_part.enqueue(job.pk)
    Job.objects.filter(pk=job.pk).update(task_id=str(result.id)[:64])


def part_last_word(job: Job, why: str) -> bool:
    """A part lost after its retry: failed, and the sweep summed when it was the last."""
    failed = lifecycle.fail(job, f"{why}, also after being queued again")
    part = CorpusSweepPart.objects.filter(pk=job.pk).values_list("corpus_id", flat=True).first()
    if part is not None:
        _finish_if_last(part)
    return failed


def _finish_if_last(sweep_id: int) -> None:
    """Sum the parts once none is left to run. Two workers finishing their last parts at once
    both get here; the conditional update lets exactly one of them write the result."""
    if CorpusSweepPart.objects.filter(corpus_id=sweep_id, status__in=PENDING).exists():
        return
    from ctxsim.overview.corpus import summed_points

    sweep = CorpusSweep.objects.get(pk=sweep_id)
    parts = list(CorpusSweepPart.objects.filter(corpus_id=sweep_id).values_list("status",
                                                                              "points"))
    points = summed_points(sweep.axes, [p for s, p in parts if s == Status.DONE])
    failed = sum(1 for s, _ in parts if s == Status.FAILED)
    with transaction.atomic():
        CorpusSweep.objects.filter(pk=sweep_id, status=Status.RUNNING).update(
            status=Status.DONE, points=points, finished_at=timezone.now(),
            message=f"{failed} of {len(parts)} sessions failed" if failed else "")


# Tasks queued before the figures moved to one store (issue 30): the rows they were for were
# not carried over, and the next overview that asks for them queues them again.
@task(queue_name="replays")
def compute_figures(session_id: int, key: str) -> dict:
    return {"status": "skipped"}


@task(queue_name="replays")
def compute_figures_many(key: str, session_ids: list[int]) -> dict:
    return {"status": "skipped"}
