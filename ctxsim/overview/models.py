"""What the worker's `replays` and `sweeps` queues store for the overview: the team overview's
figures per (session, settings) and corpus sweeps with one part per session.

A session's figures under one profile and cache rule never change once computed (stored
sessions are immutable and the key covers everything that decides them), so each is computed
once by the worker and every later overview reads it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ctxsim.jobs.models import Status
from ctxsim.teams.models import Team
from ctxsim.transcripts.models import Session


class SessionFigures(models.Model):
    """One session replayed under one profile and seen through one cache rule: the overview's
    figures for it (`ctxsim.overview.figures.FIGURE_FIELDS`). The row exists from the moment
    it is queued, so a second overview never queues it again."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    # `figures.figures_key`: the run key, the cache rule and the figures' version.
    key = models.CharField(max_length=64)
    query = models.TextField(help_text="the replay settings as the session page's query")
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    figures = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="one_figures_per_settings")
        ]
        indexes = [models.Index(fields=["key", "session"])]

    def __str__(self) -> str:
        return f"figures of session {self.session_id} ({self.key[:8]}, {self.status})"


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


class CorpusSweepPart(models.Model):
    """The grid over one session of a corpus sweep (one worker task)."""

    sweep = models.ForeignKey(CorpusSweep, on_delete=models.CASCADE, related_name="parts")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    points = models.JSONField(default=list, blank=True, help_text="one entry per grid point")
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sweep", "session"], name="one_part_per_session")
        ]
        indexes = [models.Index(fields=["sweep", "status"])]
