"""Teams own everything in ctxsim; a user sees a team's data only through a membership."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    REVIEWER = "reviewer", "Reviewer"
    VIEWER = "viewer", "Viewer"


# What each role may do beyond reading. Roles are ordered: an owner can do what a reviewer can.
WRITE_ROLES = frozenset({Role.OWNER, Role.REVIEWER})
MANAGE_ROLES = frozenset({Role.OWNER})


class Team(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=60, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    # SPEC §12: secrets in transcripts are replaced before anything is stored (owners may turn
    # it off, e.g. for a team that studies redaction itself).
    redact_secrets = models.BooleanField(
        default=True, help_text="replace API keys, tokens and passwords on import"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")
        ]
        ordering = ["team__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def can_write(self) -> bool:
        return self.role in WRITE_ROLES

    @property
    def can_manage(self) -> bool:
        return self.role in MANAGE_ROLES


def _invite_token() -> str:
    return secrets.token_urlsafe(32)


class Invite(models.Model):
    """A single-use, expiring link that makes whoever opens it a member of the team.

    The token is the whole secret (256 random bits, in the URL). An invite is spent by the first
    accept; expired or spent invites behave like unknown ones.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    token = models.CharField(max_length=64, unique=True, default=_invite_token, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"invite to {self.team} ({self.role})"

    @property
    def is_usable(self) -> bool:
        return self.used_at is None and self.expires_at > timezone.now()
