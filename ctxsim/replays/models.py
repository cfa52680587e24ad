"""What replays produce and what teams save: cached replay summaries, spilled files, profiles."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from ctxsim.jobs.models import Job
from ctxsim.teams.models import Team
from ctxsim.transcripts.models import Session


class SavedProfile(models.Model):
    """A team's own profile: a built-in one (`base`) with its stage list and parameters changed."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="profiles")
    name = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    base = models.CharField(max_length=60, help_text="the built-in profile it started from")
    stages = models.JSONField(help_text="[[stage, phase], ...]")
    params = models.JSONField(default=dict, blank=True, help_text="values that differ from base")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="profile_name_unique_in_team")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def ref(self) -> str:
        """How the session page's `profile` parameter names it."""
        return f"saved:{self.pk}"


class ReplayRun(models.Model):
    """The cached summary of one replay: per-call figures and reports, without histories.

    Keyed by a hash of everything that decides the result (resolved stages and parameter values,
    counter, engine version), so reopening a session with the same settings is instant and two
    profiles with equal values share one entry. Its spilled files are one packed record
    (`spill_files`, see `ctxsim.replays.spills`), not a row each. Rows are a cache: a session
    keeps at most CTXSIM_RUNS_PER_SESSION of them besides the `pinned` ones (its default
    profile's and saved profiles'), least recently `used_at` dropped first.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="replays")
    key = models.CharField(max_length=64)
    profile = models.CharField(max_length=120)
    stages = models.JSONField()
    config = models.JSONField(help_text="the effective configuration")
    counter = models.CharField(max_length=20)
    calls = models.JSONField(help_text="one summary object per model call")
    totals = models.JSONField()
    spill_files = models.BinaryField(default=b"", help_text="the spills, packed (spills.py)")
    pinned = models.BooleanField(
        default=False, help_text="a default or saved profile's replay: never evicted")
    used_at = models.DateTimeField(default=timezone.now, help_text="last served (roughly)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="one_replay_per_settings")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.profile} {self.key[:8]}"


class SpillContent(models.Model):
    """A distinct spilled content of one session's replays. The bytes live in Django's storage
    under their SHA-256 (stored once however often, and by however many sessions, they are
    spilled); this row says the session's replays still point to them, so deleting the session
    or evicting its replays removes the files no session points to any more."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "sha256"], name="one_row_per_spill_content")
        ]
        indexes = [models.Index(fields=["sha256"])]

    def __str__(self) -> str:
        return self.sha256


def storage_name_for(sha256: str) -> str:
    return f"spills/{sha256[:2]}/{sha256}"


class DerivedTokenCount(models.Model):
    """Token counts of contents a replay made (previews, stubs, summaries, placeholders), by
    SHA-256 of the content or of its digit shape (`ctxsim.pipeline.tokens.digit_shape`).

    Every web process has its own token cache; these rows let a process that opens a session
    for the first time take the counts another process already paid for."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    counter = models.CharField(max_length=20)
    digest = models.CharField(max_length=64)
    tokens = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "counter", "digest"], name="one_count_per_derived_content"
            )
        ]


class BackgroundReplay(Job):
    """A session page's replay handed to the worker (issue 20 item 4): a session longer than
    CTXSIM_INLINE_REPLAY_CALLS is not replayed on a request thread. One row per (session, run
    key), created with its task, so every request for the same settings — any user's — finds
    it and waits for the same replay; the worker stores the replay summary (`ReplayRun`) and
    writes its progress (`done` of `total` calls) while it runs."""

    KIND, QUEUE = "replay", "replays"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    query = models.TextField(help_text="the replay settings as the session page's query")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"],
                                    name="one_background_replay_per_settings")
        ]

    def __str__(self) -> str:
        return f"background replay of session {self.session_id} ({self.key[:8]}, {self.status})"


class CallReplay(Job):
    """A deep call view of a long session handed to the worker (issue 28 item 4): what the
    session page, a fold's rows or a message's body show of call `call`, when the session is
    longer than CTXSIM_INLINE_REPLAY_CALLS and no replay of the web process holds that call.
    One row per (session, run key, call, part): `part` says what is shown (the call pack, some
    rows, a message's body, a Find's rows; `ctxsim.replays.deep_calls`) and `digest` is its
    hash, so identical requests join one job. The worker replays to the call and keeps what
    it made in `result` (compressed), which every web process reads (and keeps in Django's
    cache). Progress: `done` of `total` calls replayed."""

    KIND, QUEUE = "call", "replays"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    query = models.TextField(help_text="the replay settings as the session page's query")
    call = models.PositiveIntegerField()
    part = models.TextField(help_text="what is shown of the call (JSON)")
    digest = models.CharField(max_length=64, help_text="SHA-256 of `part`")
    result = models.BinaryField(default=b"", help_text="what the worker made, compressed")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key", "call", "digest"],
                                    name="one_call_replay_per_part")
        ]

    def __str__(self) -> str:
        return f"call {self.call} of session {self.session_id} ({self.key[:8]}, {self.status})"
