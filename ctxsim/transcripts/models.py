"""Sessions stored in the database: the canonical messages of SPEC §1, owned by a team.

Message contents are stored once per distinct content (`Content`, keyed by SHA-256): agent
sessions repeat the same large tool outputs (re-reads, the system prompt of every sidechain),
and replays hash contents anyway to cache token counts.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ctxsim.jobs.models import Job
from ctxsim.teams.models import Team


class Content(models.Model):
    """One distinct message content, as exact bytes (they may be invalid UTF-8 after a cut)."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.PositiveBigIntegerField()
    data = models.BinaryField()
    # Token counts by counter name ({"cl100k_base": n, ...}), filled by the first replay that
    # counts this content, so a fresh worker process does not tokenize it again.
    token_counts = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"


class ReviewStatus(models.TextChoices):
    OPEN = "open", "Open"
    IN_REVIEW = "in_review", "In review"
    APPROVED = "approved", "Approved"
    NEEDS_CHANGES = "needs_changes", "Needs changes"


class Session(models.Model):
    """One conversation imported from a transcript file (a file may yield several)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="sessions")
    title = models.CharField(max_length=300)
    format = models.CharField(max_length=40)
    source_name = models.CharField(max_length=500, blank=True, help_text="uploaded file name")
    source_key = models.CharField(max_length=200, blank=True, help_text="id inside the file")
    # SHA-256 of the uploaded file's bytes, so the same file uploaded again is recognised.
    source_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="sidechains"
    )
    # The `source_key` of the parent a sidechain names (a Claude Code subagent file carries its
    # session's id): a subagent pushed on its own is linked when that session is, or arrives.
    parent_key = models.CharField(max_length=200, blank=True, db_index=True)
    # Where the transcript came from (issue 27): the machine, the project (`cwd`), the agent and
    # its version, as the upload said or, when it did not, as the transcript records them.
    origin_host = models.CharField(max_length=255, blank=True)
    origin_cwd = models.CharField(max_length=1000, blank=True)
    origin_agent = models.CharField(max_length=40, blank=True)
    origin_agent_version = models.CharField(max_length=40, blank=True)
    tools = models.JSONField(null=True, blank=True)
    response_schema = models.JSONField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # Summary statistics, computed at import so the list never loads messages.
    message_count = models.PositiveIntegerField(default=0)
    model_call_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    tool_result_count = models.PositiveIntegerField(default=0)
    error_result_count = models.PositiveIntegerField(default=0)
    total_bytes = models.PositiveBigIntegerField(default=0)
    # Filled by the default profile's replay (after import, or lazily).
    peak_raw_tokens = models.PositiveIntegerField(null=True, blank=True)
    peak_sent_tokens = models.PositiveIntegerField(null=True, blank=True)
    replay_errors = models.PositiveIntegerField(null=True, blank=True)

    review_status = models.CharField(
        max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.OPEN
    )
    review_status_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    review_status_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["team", "-created_at"]),
            models.Index(fields=["team", "origin_host"]),
            models.Index(fields=["team", "origin_cwd"]),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def origin(self) -> dict[str, str]:
        return {"host": self.origin_host, "cwd": self.origin_cwd, "agent": self.origin_agent,
                "agent_version": self.origin_agent_version}


class Message(models.Model):
    """One canonical message at position `index` of its session."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=12)
    content = models.ForeignKey(Content, on_delete=models.PROTECT, related_name="+")
    # Text, not CharField: the transcript decides their length and the replay reads them, so a
    # cut id no longer matches its call (issue 20 item 17).
    name = models.TextField(blank=True)
    # [{"id", "type", "name", "arguments"}], arguments as the JSON string the model produced.
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.TextField(blank=True)
    is_error = models.BooleanField(default=False)
    error_code = models.TextField(blank=True)
    agent_feedback = models.BooleanField(default=False)
    meta = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["session", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="one_message_per_position")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.index} {self.role}"


class ImportJob(Job):
    """A transcript imported by the background worker: the stored upload and its progress
    (`done`: percent, of `total` 100).

    The import itself is one transaction, so a job that dies leaves no session behind; the job
    row (written outside that transaction) is what tells the user what happened.
    """

    KIND, QUEUE = "import", "imports"

    file_name = models.CharField(max_length=500)
    size = models.PositiveBigIntegerField()
    # Path in the default storage; emptied once the import succeeded and the file is deleted.
    stored_name = models.CharField(max_length=500, blank=True)
    format = models.CharField(max_length=40, blank=True, help_text="forced format; empty = detect")
    sha256 = models.CharField(max_length=64, blank=True, help_text="of the uploaded bytes")
    session_ids = models.JSONField(default=list, blank=True)
    # Secrets replaced in the stored upload before it was written ({kind: count}); the worker
    # adds them to what it finds itself, so the sessions show the upload's total.
    redactions = models.JSONField(default=dict, blank=True)
    # Where the upload came from (host, cwd, agent, agent_version), given to its sessions.
    origin = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.status})"

    @property
    def progress(self) -> int:
        """Percent of the import done (an import counts its progress in percent)."""
        return self.done

    @property
    def percent(self) -> int:
        return min(100, self.done)

    @property
    def message_line(self) -> str:
        """The message's first line: what the page shows (a failed import may keep the
        reasons behind it on the following lines, `TranscriptError.with_details`)."""
        return self.message.split("\n", 1)[0]

    @property
    def message_details(self) -> list[str]:
        return [line for line in self.message.split("\n")[1:] if line]

    @property
    def can_requeue(self) -> bool:
        return self.status == self.Status.FAILED and bool(self.stored_name)

    def totals(self) -> dict[str, int]:
        rows = self.sessions().values_list("tool_call_count", "tool_result_count")
        return {
            "sessions": len(rows),
            "tool_calls": sum(calls for calls, _ in rows),
            "tool_results": sum(results for _, results in rows),
        }

    def sessions(self) -> models.QuerySet[Session]:
        """The sessions this job created, within the job's own team."""
        return Session.objects.filter(team_id=self.team_id, pk__in=self.session_ids or []).order_by(
            "pk"
        )


class UploadClaim(models.Model):
    """The one request importing these bytes into this team right now (issue 27, 28 item 6).

    The unique constraint is what makes uploads idempotent under concurrency: a second request
    with the same bytes cannot insert its claim, waits until the first one's is gone, then
    finds the sessions (or the job) the first one stored. Deleted when the import is over; a
    claim older than the import timeout is a dead process's and is taken over.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "sha256"], name="one_import_per_team_bytes")
        ]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.sha256[:12]}"
