"""API tokens and the files received through the API (SPEC §12).

A token belongs to a team, not to a person: it keeps working when its creator leaves, and the
team's owners revoke it. Only the SHA-256 of the token is stored; the token itself is shown
once, when it is created.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ctxsim.teams.models import Team
from ctxsim.transcripts.models import ImportJob, Session


class Scope(models.TextChoices):
    INGEST = "ingest", "Ingest (upload transcripts)"
    READ = "read", "Read (sessions, traces, jobs)"


class ApiToken(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # Comma-separated scopes, each one of `Scope`, e.g. "ingest" or "ingest,read".
    scopes = models.CharField(max_length=40)
    token_hash = models.CharField(max_length=64, unique=True)
    # The first characters of the token, so owners can tell tokens apart (not enough to use one).
    prefix = models.CharField(max_length=16)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scopes}) in {self.team}"

    @property
    def scope_list(self) -> list[str]:
        return [s for s in self.scopes.split(",") if s]

    def allows(self, scope: str) -> bool:
        return scope in self.scope_list

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ReceivedFile(models.Model):
    """One file received by `POST /api/v1/transcripts`: what makes a repeat idempotent (the
    SHA-256 of its bytes) and what links a resumed agent session to its earlier uploads (the
    agent's own `session_key`)."""

    class Outcome(models.TextChoices):
        PENDING = "pending", "Importing in the background"
        NEW = "new", "New sessions"
        EXISTING = "existing", "The same bytes were stored already"
        SUPERSEDED = "superseded", "A newer upload of this session key replaced it"
        REPLACED = "replaced", "Replaced the earlier upload of this session key"
        LINKED = "linked", "Stored beside the earlier upload (it has comments or a status)"
        FAILED = "failed", "Failed"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="received_files")
    token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    name = models.CharField(max_length=500, blank=True)
    session_key = models.CharField(max_length=200, blank=True)
    job = models.OneToOneField(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="received"
    )
    sessions = models.ManyToManyField(Session, blank=True, related_name="received_files")
    # The earlier upload of the same session key this one was stored beside (outcome "linked").
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="newer"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.NEW)
    # The newest settled upload of its session key: at most one per (team, key), so two
    # uploads settling at once cannot both keep their sessions (issue 27).
    current = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["team", "sha256"]),
            models.Index(fields=["team", "session_key"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "session_key"],
                condition=models.Q(current=True) & ~models.Q(session_key=""),
                name="one_current_upload_per_session_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name or self.sha256[:12]} ({self.outcome})"
