"""A ticket per background task someone asked for: who asked, for which team, what kind, so
the quotas of `ctxsim.jobs.policy` can count what each user and team has pending."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
