"""The worker's side of the overview and of corpus sweeps (run by `manage.py db_worker`).

- `compute_figures_many(key, session_ids)` (queue "replays"): one overview column, session
  by session (`compute_figures` is one session, for tasks queued before); each
  `SessionFigures` row, created when it was queued, is claimed and then filled.
- `run_corpus_part(part_id)` (queue "sweeps"): a corpus sweep's grid over one session; the
  part that finishes last sums every part into the sweep's points and front.

`enqueue_many` queues many tasks in bulk: an overview over 1,000 sessions and 4 profiles is
4,000 tasks, queued in a few inserts rather than one round trip each. `services` imports this
module; nothing here imports `services`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import QueryDict
from django.tasks import task
from django.tasks.base import Task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.insights import sweep as sweeps
from ctxsim.overview.figures import session_figures
from ctxsim.overview.models import CorpusSweep, CorpusSweepPart, SessionFigures, Status
from ctxsim.replays import services as replays
from ctxsim.replays.cache import releases_memory
from ctxsim.replays.state import settings_from_query

logger = logging.getLogger(__name__)

BULK_BATCH = 500


SHARED_COLUMN_SESSIONS = 8


def shared_copies(columns: Mapping[str, list[int]]) -> list[tuple[str, list[int]]]:
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


@task(queue_name="replays")
@releases_memory
def compute_figures(session_id: int, key: str) -> dict:
    """One session's overview figures under one profile and cache rule."""
    return compute_figures_job(session_id, key)


@task(queue_name="replays")
def compute_figures_many(key: str, session_ids: list[int]) -> dict:
    """One overview column: the figures of these sessions under one profile and cache rule,
    one after the other (one task per column a request queues, not per session: a user's
    quota counts tasks; issue 28 item 1)."""
    outcomes: dict[str, int] = {}
    for session_id in session_ids:
        status = compute_figures_job(session_id, key)["status"]
        outcomes[status] = outcomes.get(status, 0) + 1
    return outcomes


def compute_figures_job(session_id: int, key: str) -> dict:
    claim = SessionFigures.objects.filter(session_id=session_id, key=key, status=Status.QUEUED)
    if not claim.update(status=Status.RUNNING, started_at=timezone.now()):
        return {"status": "skipped"}  # done already, or taken by another worker
    row = SessionFigures.objects.select_related("session__team").get(session_id=session_id,
                                                                      key=key)
    try:
        settings, _ = settings_from_query(QueryDict(row.query), row.session.team)
        cache, _ = cache_choice(row.cache | {"price": price_text(row.cache)})
        figures = session_figures(row.session, settings, cache)
    except Exception as exc:  # the row must say it failed, whatever went wrong
        logger.exception("overview figures of session %s failed", session_id)
        SessionFigures.objects.filter(pk=row.pk).update(
            status=Status.FAILED, message=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now())
        return {"status": "failed"}
    SessionFigures.objects.filter(pk=row.pk).update(status=Status.DONE, figures=figures,
                                                    finished_at=timezone.now())
    return {"status": "done"}


@task(queue_name="sweeps")
def run_corpus_part(part_id: int) -> dict:
    """A corpus sweep's grid over one of its sessions."""
    return run_corpus_part_job(part_id)


POINT_FIELDS = ("sent_tokens", "cost", "no_cache_cost", "lost_references", "rereads",
                "failed_calls")


def run_corpus_part_job(part_id: int) -> dict:
    part = CorpusSweepPart.objects.select_related("sweep__team", "session").filter(
        pk=part_id).first()
    if part is None or part.sweep.status not in (Status.QUEUED, Status.RUNNING):
        return {"status": "skipped"}  # cancelled, or the sweep is gone
    if not CorpusSweepPart.objects.filter(pk=part.pk, status=Status.QUEUED).update(
            status=Status.RUNNING, started_at=timezone.now()):
        return {"status": "skipped"}
    sweep = part.sweep
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
        status, message = Status.DONE, ""
    except Exception as exc:
        logger.exception("corpus sweep part %s failed", part.pk)
        points, status, message = [], Status.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    CorpusSweepPart.objects.filter(pk=part.pk).update(status=status, points=points,
                                                      message=message)
    _finish_if_last(sweep.pk)
    return {"status": status}


def _finish_if_last(sweep_id: int) -> None:
    """Sum the parts once none is left to run. Two workers finishing their last parts at once
    both get here; the conditional update lets exactly one of them write the result."""
    if CorpusSweepPart.objects.filter(sweep_id=sweep_id,
                                      status__in=(Status.QUEUED, Status.RUNNING)).exists():
        return
    from ctxsim.overview.corpus import summed_points

    sweep = CorpusSweep.objects.get(pk=sweep_id)
    parts = list(CorpusSweepPart.objects.filter(sweep_id=sweep_id).values_list("status",
                                                                              "points"))
    points = summed_points(sweep.axes, [p for s, p in parts if s == Status.DONE])
    failed = sum(1 for s, _ in parts if s == Status.FAILED)
    with transaction.atomic():
        CorpusSweep.objects.filter(pk=sweep_id, status=Status.RUNNING).update(
            status=Status.DONE, points=points, finished_at=timezone.now(),
            message=f"{failed} of {len(parts)} sessions failed" if failed else "")
