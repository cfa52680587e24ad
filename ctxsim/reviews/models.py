"""Comments on a session and its activity list. Both belong to a team through their session.

A comment is anchored to one of three things:
- the session (`call_index` and `message_index` empty);
- one model call (`call_index` set);
- one message as sent in one call (`call_index` and `message_index` set).

`message_index` is the transcript message's position in the stored session (`Message.index`, the
`origin` the replay keeps on every message it sends), not the row's position in the call view:
rows move when thresholds change (messages are removed, injected or spilled), the origin does
not, so a comment stays on the message it was written about whatever profile is shown. Messages
a stage injected have no origin and cannot carry their own comments (comment on the call).

Threads are one level deep: a reply's `parent` is always the thread's first comment, and only
that first comment is resolved or reopened (it stands for the thread).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ctxsim.transcripts.models import Session

BODY_MAX_CHARS = 10_000


class Comment(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="comments")
    call_index = models.PositiveIntegerField(null=True, blank=True)
    message_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="Message.index in the session (the replay's origin)"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    body = models.TextField(max_length=BODY_MAX_CHARS, help_text="plain text, shown escaped")
    created_at = models.DateTimeField(default=timezone.now)
    resolved = models.BooleanField(default=False)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["session", "call_index"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(message_index__isnull=True) | Q(call_index__isnull=False),
                name="comment_message_needs_call",
            )
        ]

    def __str__(self) -> str:
        return f"comment {self.pk} on session {self.session_id}"

    @property
    def anchor_label(self) -> str:
        if self.call_index is None:
            return "session"
        if self.message_index is None:
            return f"call {self.call_index}"
        return f"call {self.call_index}, message {self.message_index}"

    @property
    def dom_id(self) -> str:
        return f"comment-{self.pk}"

    def get_absolute_url(self) -> str:
        """The permalink: a redirect view that checks access, then opens the call."""
        return reverse("comment-permalink", args=[self.pk])


class Activity(models.Model):
    """One line of a session's activity list, written by `reviews.services` only."""

    class Kind(models.TextChoices):
        UPLOAD = "upload", "uploaded"
        STATUS = "status", "changed the review status"
        COMMENT = "comment", "commented"
        REPLY = "reply", "replied"
        RESOLVE = "resolve", "resolved a thread"
        REOPEN = "reopen", "reopened a thread"
        PROFILE_SAVED = "profile_saved", "saved a profile"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="activity")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    detail = models.CharField(max_length=300, blank=True)
    comment = models.ForeignKey(
        Comment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["session", "created_at"])]
        verbose_name_plural = "activity"

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind} {self.created_at:%Y-%m-%d %H:%M}"
