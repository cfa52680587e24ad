"""Parameter sweeps run in the background: their settings, progress and resulting points."""

from __future__ import annotations

from django.db import models

from ctxsim.jobs.models import Job
from ctxsim.transcripts.models import Session


class Sweep(Job):
    """One sweep over one session: a grid of one or two integer parameters around a profile.
    Its owner is the job's `user`; progress is `done` of `total` combinations."""

    KIND, QUEUE = "sweep", "sweeps"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="sweeps")
    # The session page's query the sweep varies around (profile, stages, parameters).
    query = models.TextField(blank=True)
    axes = models.JSONField(help_text='[{"name": ..., "values": [...]}, ...]')
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')
    points = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"sweep {self.pk} of session {self.session_id} ({self.status})"

    @property
    def axis_names(self) -> list[str]:
        return [a["name"] for a in self.axes]


class SessionResult(models.Model):
    """One session replayed under one run key and seen through one cache rule: the one store
    of per-session figures (issue 30), read by the cache & information-loss page, sweeps,
    the team overview and corpus sweeps' overview links. `data` is the insights report
    (`ctxsim.insights.report.as_data`), `figures` the overview's figures
    (`ctxsim.overview.figures`, valid under `figures_version` only: a bump leaves them
    unread). Each is computed once, by whichever asks first, and read from here after.

    A row the overview queued says which job computes it (`job`; `attempt`: the attempt that
    claimed it, None while only queued for it). The row keeps no status of its own: its job's
    life (`ctxsim.jobs.lifecycle`) says whether it is pending, and a job lost for good leaves
    its unfinished rows failed with the job's message."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="results")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    rule = models.CharField(max_length=200, help_text="model, lifetime and price")
    data = models.JSONField(null=True, blank=True, help_text="the insights report")
    figures = models.JSONField(null=True, blank=True, help_text="the overview's figures")
    figures_version = models.PositiveSmallIntegerField(default=0)
    message = models.TextField(blank=True, help_text="why the figures failed")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    attempt = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key", "rule"],
                                               name="one_result_per_replay_and_rule")]
        indexes = [models.Index(fields=["key", "rule", "session"], name="result_key_rule")]

    def __str__(self) -> str:
        return f"result of session {self.session_id} ({self.key[:8]}, {self.rule})"


class InsightsJob(Job):
    """A `SessionResult`'s insights report the task worker is computing, because the
    session is too long for a request (CTXSIM_INSIGHTS_INLINE_CALLS, issue 20 item 5). At
    most one per (session, settings, rule): the page polls it instead of queueing another;
    the worker deletes it once the result is stored, or marks it failed with the reason."""

    KIND, QUEUE = "insights", "replays"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="insights_jobs")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    rule = models.CharField(max_length=200, help_text="model, lifetime and price")
    query = models.TextField(help_text="the replay settings as the session page's query")
    cache = models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key", "rule"],
                                               name="one_insights_job_per_replay_and_rule")]

    def __str__(self) -> str:
        return f"insights job of session {self.session_id} ({self.status})"
