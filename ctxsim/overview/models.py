"""The overview's jobs: an overview column's tasks and corpus sweeps with one part per session.

A session's figures under one profile and cache rule never change once computed (stored
sessions are immutable and the key covers everything that decides them), so each is computed
once by the worker, stored in the one store of per-session results
(`ctxsim.analysis.models.SessionResult`), and every later overview reads it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ctxsim.jobs.models import Job, Status
from ctxsim.teams.models import Team
from ctxsim.transcripts.models import Session


class ColumnTask(Job):
    """One task of an overview column (issue 30): the figures of these sessions under one
    run key and cache rule, stored in `ctxsim.analysis.models.SessionResult`. A column of
    many sessions is queued as CTXSIM_OVERVIEW_TASKS_PER_COLUMN jobs, each starting at
    another point of its list (the helper copies are not `counted`: the quota counts the
    column once); each row is claimed by the one attempt that computes it."""

    KIND, QUEUE = "overview", "replays"

    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    rule = models.CharField(max_length=200, help_text="model, lifetime and price")
    query = models.TextField(help_text="the replay settings as the session page's query")
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')
    sessions = models.JSONField(default=list, help_text="session ids, in the order taken")

    def __str__(self) -> str:
        return f"overview column task {self.pk} ({self.key[:8]}, {self.status})"


class CorpusSweep(models.Model):
    """A sweep's grid over many sessions: one part per session, summed into one front."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="corpus_sweeps")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    filters = models.TextField(blank=True, help_text="the overview's filter query")
    query = models.TextField(blank=True, help_text="the settings the grid varies around")
    axes = models.JSONField(help_text='[{"name": ..., "values": [...]}, ...]')
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0, help_text="sessions")
    points = models.JSONField(default=list, blank=True, help_text="summed over the sessions")
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"corpus sweep {self.pk} of team {self.team_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in (Status.QUEUED, Status.RUNNING)

    @property
    def axis_names(self) -> list[str]:
        return [a["name"] for a in self.axes]


class CorpusSweepPart(Job):
    """The grid over one session of a corpus sweep: one job, one worker task (issue 30: its
    life is `Job`'s, settled by `ctxsim.jobs.lifecycle`). Only the sweep's last part is
    `counted` by the quotas (the sweep is one of its user's pending jobs)."""

    KIND, QUEUE = "corpus", "sweeps"

    # ("sweep" is `Job`'s own name for an `analysis.Sweep`.)
    corpus = models.ForeignKey(CorpusSweep, on_delete=models.CASCADE, related_name="parts")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    points = models.JSONField(default=list, blank=True, help_text="one entry per grid point")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["corpus", "session"], name="one_part_per_session")
        ]
