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


class InsightsResult(models.Model):
    """One replay seen through one cache rule (`ctxsim.insights.report.as_data`), stored like
    replay summaries: a second visit of the cache & information-loss page, or a sweep point
    already computed, is a lookup instead of a replay and a cache simulation."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE,
                                related_name="insights_results")
    key = models.CharField(max_length=64, help_text="the replay's run key (settings)")
    rule = models.CharField(max_length=200, help_text="model, lifetime and price")
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key", "rule"],
                                               name="one_insights_result_per_replay_and_rule")]

    def __str__(self) -> str:
        return f"insights of session {self.session_id} ({self.rule})"


class InsightsJob(Job):
    """An `InsightsResult` the task worker is computing, because the session is too long for
    a request (CTXSIM_INSIGHTS_INLINE_CALLS, issue 20 item 5). At most one per (session,
    settings, rule): the page polls it instead of queueing another; the worker deletes it
    once the result is stored, or marks it failed with the reason."""

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
