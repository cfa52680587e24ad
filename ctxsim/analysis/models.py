"""Parameter sweeps run in the background: their settings, progress and resulting points."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ctxsim.transcripts.models import Session


class Sweep(models.Model):
    """One sweep over one session: a grid of one or two integer parameters around a profile."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="sweeps")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The session page's query the sweep varies around (profile, stages, parameters).
    query = models.TextField(blank=True)
    axes = models.JSONField(help_text='[{"name": ..., "values": [...]}, ...]')
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    points = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Beaten by the worker through every point; a running sweep silent for longer than
    # CTXSIM_SWEEP_TIMEOUT_SECONDS lost its worker (issue 20 item 12).
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"sweep {self.pk} of session {self.session_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def percent(self) -> int:
        return self.done * 100 // self.total if self.total else 0

    @property
    def axis_names(self) -> list[str]:
        return [a["name"] for a in self.axes]
