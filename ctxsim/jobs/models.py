"""The job system's tables (issue 30).

`Job` is every background job's life, one row per job whatever its kind: who owns it (user,
team), its kind and queue, its status, progress (`done` of `total`), heartbeat, message, the
task that runs it and its attempts, and when it was created, started and finished. Each kind
keeps only its payload in a table of its own that extends `Job` (Django's multi-table
inheritance: `ImportJob`, `Sweep`, `BackgroundReplay`, `TraceFile`), so `job.status`, filters
and reads on either table work alike, and one piece of code (`ctxsim.jobs.lifecycle`) claims,
beats, settles and re-queues every kind. Lifecycle writes go to `Job` itself, so a conditional
update (a claim, "only while still this attempt's") is one statement on one table.

The quotas of `ctxsim.jobs.policy` count pending jobs (`counted`: an overview column's helper
copies and a corpus sweep's parts but one do the work of a job counted already).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction


class Status(models.TextChoices):
    """Where a background job is in its life (every kind of job alike)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# A job not ended yet: waiting for a worker or running.
PENDING = (Status.QUEUED, Status.RUNNING)


class JobQuerySet(models.QuerySet):
    """A kind's rows, whose `update` is one conditional update however its fields are split
    between `Job` and the kind's table.

    Django updates a parent's fields by first reading the matching ids, then writing those
    ids: two workers claiming the same job could both win. Here the ids are read with their
    rows locked (PostgreSQL re-checks the filter on a row another transaction just changed;
    SQLite's write transactions are exclusive, `transaction_mode` IMMEDIATE) and both tables
    are written inside that transaction, so the count returned is the rows this call really
    changed."""

    def update(self, **fields: Any) -> int:
        if self.model is Job:
            return super().update(**fields)
        life = {name: value for name, value in fields.items() if name in JOB_FIELDS}
        if not life:
            return super().update(**fields)
        own = {name: value for name, value in fields.items() if name not in life}
        with transaction.atomic(using=self.db):
            ids = list(self.order_by().select_for_update().values_list("pk", flat=True))
            if not ids:
                return 0
            Job.objects.using(self.db).filter(pk__in=ids).update(**life)
            if own:
                self.model._base_manager.using(self.db).filter(pk__in=ids).update(**own)
        return len(ids)


class Job(models.Model):
    """One background job's life, whatever its kind (the kind's table holds its payload).

    A running job's worker beats `heartbeat_at` through every phase; a running job silent for
    longer than its kind's timeout lost its worker and is settled by `ctxsim.jobs.lifecycle`.
    `attempts` is bumped on every re-queue, so a stale task of an earlier attempt does nothing.
    """

    Status = Status
    objects = JobQuerySet.as_manager()
    KIND = ""  # set by each kind
    QUEUE = "default"

    kind = models.CharField(max_length=20, help_text="import, sweep, replay, trace, insights, "
                            "overview, corpus")
    queue = models.CharField(max_length=20, default="default")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="jobs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0, help_text="steps done (an import: percent)")
    total = models.PositiveIntegerField(default=0, help_text="steps in all")
    message = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True, help_text="the queued task's id")
    attempts = models.PositiveIntegerField(default=0)
    counted = models.BooleanField(default=True, help_text="counted by the quotas (not the "
                                  "helper copies of work already counted once)")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["kind", "status"], name="job_kind_status"),
                   models.Index(fields=["team", "status"], name="job_team_status"),
                   models.Index(fields=["status"], name="job_status")]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        if not self.kind:
            self.kind, self.queue = type(self).KIND, type(self).QUEUE
        if self.team_id is None and getattr(self, "session_id", None) is not None:
            self.team_id = self.session.team_id  # type: ignore[attr-defined]
        super().save(*args, **kwargs)

    @property
    def is_active(self) -> bool:
        return self.status in PENDING

    @property
    def percent(self) -> int:
        return min(100, self.done * 100 // self.total) if self.total else 0

    @property
    def poll_url(self) -> str:
        """Where a page polls this job (`ctxsim.jobs.poll`)."""
        from ctxsim.jobs.poll import poll_url

        return poll_url([self])

    @property
    def poll_every(self) -> int:
        from ctxsim.jobs.poll import EVERY

        return EVERY.get(self.kind or type(self).KIND, 1)

    @property
    def poll_look(self) -> tuple[str, str, str]:
        from ctxsim.jobs.poll import look

        return look(self.kind or type(self).KIND)


JOB_FIELDS = frozenset(
    name for f in Job._meta.concrete_fields for name in (f.name, f.attname))


class TraceFile(Job):
    """A session's trace written by the worker (issue 28 item 2): a session longer than
    CTXSIM_INLINE_REPLAY_CALLS is never replayed by the request that asks for its trace. One
    row per (session, settings, summary or full), created with its task; the file is kept in
    the default storage for `ctxsim.replays.traces.KEEP_SECONDS` and served from there.
    Progress: `done` of `total` calls written."""

    KIND, QUEUE = "trace", "replays"

    session = models.ForeignKey("transcripts.Session", on_delete=models.CASCADE,
                                related_name="+")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    summary = models.BooleanField(default=True)
    query = models.TextField(help_text="the replay settings as the session page's query")
    stored_name = models.CharField(max_length=300, blank=True)
    size = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key", "summary"],
                                               name="one_trace_file_per_settings")]


def bulk_create_kind[J: Job](model: type[J], objs: list[J], batch_size: int = 500) -> list[J]:
    """Create many jobs of one kind in a few inserts: their `Job` rows in bulk, then the
    kind's rows beside them (Django's `bulk_create` refuses a model that extends another)."""
    life = [f for f in Job._meta.concrete_fields if not f.primary_key]
    for obj in objs:
        obj.kind, obj.queue = model.KIND, model.QUEUE
    parents = Job.objects.bulk_create(
        [Job(**{f.attname: getattr(obj, f.attname) for f in life}) for obj in objs],
        batch_size=batch_size)
    for obj, parent in zip(objs, parents, strict=True):
        obj.job_ptr_id = obj.pk = parent.pk  # type: ignore[attr-defined]
        obj.created_at = parent.created_at
        obj._state.adding = False
    fields = model._meta.local_concrete_fields
    for start in range(0, len(objs), batch_size):
        model._base_manager._insert(objs[start:start + batch_size],  # type: ignore[attr-defined]
                                    fields=fields, using=model.objects.db)
    return objs
