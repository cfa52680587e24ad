"""A ticket per background task someone asked for: who asked, for which team, what kind, so
the quotas of `ctxsim.jobs.policy` can count what each user and team has pending."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Status(models.TextChoices):
    """Where a background job is in its life (every kind of job alike)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class Ticket(models.Model):
    """One queued or running task of a user (or of nobody: an import's list figures). Given
    back (deleted) when its task ends (`receivers`), when a newer request of the same user
    supersedes it, or counted no more once older than `policy.TICKET_SECONDS` (a worker
    killed mid-task leaves its ticket behind)."""

    kind = models.CharField(max_length=20, help_text="replay, overview, sweep, trace, insights")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey("teams.Team", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    subject = models.CharField(max_length=100, blank=True,
                               help_text='what it works on, e.g. "session:12"')
    key = models.CharField(max_length=200, blank=True, help_text="what it computes")
    task_id = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"]),
                   models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} {self.key} ({self.task_id})"


class TraceFile(models.Model):
    """A session's trace written by the worker (issue 28 item 2): a session longer than
    CTXSIM_INLINE_REPLAY_CALLS is never replayed by the request that asks for its trace. One
    row per (session, settings, summary or full), created with its task; the file is kept in
    the default storage for `ctxsim.replays.traces.KEEP_SECONDS` and served from there."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    session = models.ForeignKey("transcripts.Session", on_delete=models.CASCADE,
                                related_name="+")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    summary = models.BooleanField(default=True)
    query = models.TextField(help_text="the replay settings as the session page's query")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0, help_text="calls written")
    total = models.PositiveIntegerField(default=0, help_text="calls of the session")
    message = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    stored_name = models.CharField(max_length=300, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key", "summary"],
                                               name="one_trace_file_per_settings")]

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def percent(self) -> int:
        return min(100, self.done * 100 // self.total) if self.total else 0
