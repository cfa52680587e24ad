"""One life for every background job (issue 30): the stuck detector and the re-queue.

Every kind's row extends `ctxsim.jobs.models.Job`, so what happens to a job whose worker died
is decided here once, whatever the kind:

- **Lost.** A job "running" whose heartbeat (or, before its first beat, its start) is older
  than its kind's timeout lost its worker (`lost`: one query over `Job`, or no query for rows
  a page already read, `among`).
- **Settled the same way** (`settle`): the lost attempt's task row is marked failed
  (`ctxsim.heartbeat.settle_lost_tasks`, `WorkerLost`); then the job
  is queued again once (`AUTO_RETRIES`: a worker restarted mid-job finishes it; `attempts`
  tells a stale task of the lost attempt to do nothing), and a job lost again is failed with
  a sentence saying the worker stopped. A kind may give a lost job a better last word than
  "failed" (an import whose sessions were stored is done): its `last_word`.
- **Who calls it.** Each job a worker starts settles every kind's lost jobs first, each page
  that shows a job (polling it) settles the rows it shows, and the worker settles the job of
  a task whose process died at once (`task_lost`).

Each kind registers once (`register`, from its app's `ready`): how to queue its task again and,
optionally, its last word. `run` is the task runner a kind's task calls: settle, claim, beat,
fail on any error (the replays queue's kinds run through it; an import and a sweep, with
phases and resumable points of their own, use its pieces: `ours`, `fail`, `Heartbeat`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ctxsim.heartbeat import Heartbeat, settle_lost_tasks
from ctxsim.jobs import policy
from ctxsim.jobs.models import Job, Status

logger = logging.getLogger(__name__)

# A job whose worker died is queued again this many times before it is settled for good.
AUTO_RETRIES = 1


@dataclass(frozen=True)
class Kind:
    """How the job system handles one kind of job."""

    name: str
    model: type[Job]
    timeout: Callable[[], timedelta]
    enqueue: Callable[[Job], None]  # queue the job's task again
    # The last word on a job lost after its retries (None: failed with `why`); returns
    # whether it settled the job.
    last_word: Callable[[Job, str], bool] | None = None
    doing: str = "running it"  # "the worker stopped while ..."


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    KINDS[kind.name] = kind


def span(timeout: timedelta) -> str:
    minutes = int(timeout.total_seconds() // 60)
    return f"{minutes} min" if minutes else f"{int(timeout.total_seconds())} s"


def _silent(job: Job, cutoff) -> bool:
    """The in-memory form of `lost`'s query."""
    if job.status != Status.RUNNING:
        return False
    moment = job.heartbeat_at or job.started_at or job.created_at
    return moment is not None and moment < cutoff


def lost(now=None, *, kinds: Iterable[str] | None = None,
         among: Iterable[Job] | None = None) -> list[Job]:
    """Running jobs of these kinds (all registered kinds) silent past their kind's timeout."""
    now = now or timezone.now()
    names = [k for k in (kinds if kinds is not None else KINDS) if k in KINDS]
    if among is not None:
        rows = [job for job in among
                if job.kind in names and _silent(job, now - KINDS[job.kind].timeout())]
        return list(Job.objects.filter(pk__in=[job.pk for job in rows],
                                       status=Status.RUNNING)) if rows else []
    query = Q(pk__in=[])
    for name in names:
        cutoff = now - KINDS[name].timeout()
        query |= Q(kind=name) & (Q(heartbeat_at__lt=cutoff) | Q(
            heartbeat_at__isnull=True, started_at__lt=cutoff) | Q(
            heartbeat_at__isnull=True, started_at__isnull=True, created_at__lt=cutoff))
    return list(Job.objects.filter(query, status=Status.RUNNING))


def settle(now=None, *, kinds: Iterable[str] | None = None,
           among: Iterable[Job] | None = None) -> int:
    """Settle the lost jobs (see the module's docstring); returns how many were settled."""
    settled = 0
    for job in lost(now, kinds=kinds, among=among):
        kind = KINDS[job.kind]
        settled += _settle(job, f"the worker stopped while {kind.doing} (no heartbeat for "
                                f"over {span(kind.timeout())})")
    return settled


def task_lost(task_id: str, why: str) -> int:
    """The process running this task died (`ctxsim.jobs.worker` saw it): settle its job now,
    as a lost one, without waiting for its heartbeat to go silent."""
    jobs = Job.objects.filter(task_id=str(task_id)[:64], status=Status.RUNNING,
                              kind__in=list(KINDS))
    return sum(_settle(job, why) for job in jobs)


def _settle(job: Job, why: str) -> int:
    """Queued again once, then the kind's last word (failed by default); the lost attempt's
    task row says its worker was lost."""
    kind = KINDS[job.kind]
    if job.attempts < AUTO_RETRIES and requeue(job, f"{why}; queued again"):
        settled = 1
    elif kind.last_word is not None:
        settled = int(kind.last_word(job, why))
    else:
        settled = int(fail(job, f"{why}, also after being queued again"))
    settle_lost_tasks([job.task_id], why)
    return settled


def ours(job: Job, model: type[Job] = Job):
    """The job's row while it is still this attempt's running job (through `model`, a kind's
    own queryset: an update may then set its payload's fields too)."""
    return model.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)


def fail(job: Job, message: str) -> bool:
    return bool(ours(job).update(status=Status.FAILED, message=message[:2000],
                                 finished_at=timezone.now()))


def requeue(job: Job, message: str = "") -> bool:
    """Queue a running job again as its next attempt, with its kind's task. False when it was
    no longer this attempt's."""
    with transaction.atomic():
        if not ours(job).update(status=Status.QUEUED, attempts=job.attempts + 1, done=0,
                                message=message, started_at=None, heartbeat_at=None,
                                task_id=""):
            return False
        job.attempts += 1
        # In the same transaction: the database task backend's row commits with the job's.
        KINDS[job.kind].enqueue(KINDS[job.kind].model.objects.get(pk=job.pk))
    return True


def reopen[J: Job](job: J, was: str, user: Any = None, **fields: Any) -> J:
    """Queue an ended job again because a request asks for it again (done but its result
    gone, failed a while ago, cancelled), once however many requests find it at the same
    moment: only the request whose conditional update wins queues its kind's task. `fields`
    reset the kind's own payload too. Returns the row as it is now."""
    with transaction.atomic():
        if type(job).objects.filter(pk=job.pk, status=was).update(
                status=Status.QUEUED, done=0, message="", started_at=None, heartbeat_at=None,
                finished_at=None, created_at=timezone.now(), user_id=policy.user_id(user),
                **fields):
            KINDS[job.kind].enqueue(job)
    job.refresh_from_db()
    return job


class Attempt:
    """A claimed job while its task runs: writes apply only while it is this attempt's."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.done: int | None = None
        self.ours = ours(job, type(job))

    def progress(self, done: int) -> None:
        """What the next heartbeat writes as the job's progress."""
        self.done = done

    def beat(self) -> None:
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        if self.done is not None:
            fields["done"] = self.done
        self.ours.update(**fields)

    def finish(self, status: str, message: str = "", **fields: Any) -> bool:
        now = timezone.now()
        return bool(self.ours.update(status=status, message=message[:2000], finished_at=now,
                                     heartbeat_at=now, **fields))


def run[J: Job](model: type[J], body: Callable[[J, Attempt], dict], *, every: float,
                **lookup: Any) -> dict:
    """The task runner of a job: settle the lost jobs first (a worker that died left them
    "running"), claim this one (queued → running: one task wins however many try), beat its
    heartbeat from a thread while `body(job, attempt)` runs, and fail it saying why whatever
    `body` raises. `body` writes the job's end (`attempt.finish`) and returns the task's
    result."""
    settle()
    started = timezone.now()
    if not model.objects.filter(status=Status.QUEUED, **lookup).update(
            status=Status.RUNNING, started_at=started, heartbeat_at=started, done=0):
        return {"status": "skipped"}  # done already, or taken by another worker
    job = model.objects.get(**lookup)
    attempt = Attempt(job)
    try:
        with Heartbeat(attempt.beat, every, f"{job.kind}-{job.pk}-heartbeat"):
            return body(job, attempt)
    except Exception as exc:  # the job must say it failed, whatever went wrong
        logger.exception("%s job %s failed", job.kind, job.pk)
        attempt.finish(Status.FAILED, f"{type(exc).__name__}: {exc}")
        return {"status": "failed"}

