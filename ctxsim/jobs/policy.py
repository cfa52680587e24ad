"""Fair, bounded background work (issues 28 and 30): the one place the quotas live.

Imports have a queue and a worker of their own (`bin/run-dev`, `bin/serve-prod`): nothing
below limits them. Every other job a request asks the worker for is a `Job` (issue 30: the
tickets of issue 28 are the jobs themselves), counted while it is queued or running:

- **Quotas.** One user may have `CTXSIM_PENDING_PER_USER` jobs pending, one team
  `CTXSIM_PENDING_PER_TEAM`, counted over every kind together (an API token's requests count
  for its team). A request that would queue past either is refused before anything is
  queued: `QueueFull`, which the middleware answers with a 429, a `Retry-After` and one
  sentence saying which limit and how to go on. (Before: a viewer's 20 overview GETs with
  new thresholds queued 131 tasks and another team's import waited behind them for 8
  minutes.)
- **Joining.** A request for work already queued (the same session and settings, the same
  overview column) joins it and queues nothing: each kind keeps one row per (subject,
  settings) (`BackgroundReplay`, `InsightsJob`; an overview column's rows in
  `analysis.SessionResult` name the job computing them).
- **Superseding** (issue 31). A background replay still *queued* for a user is dropped
  (cancelled: counted no more) when the same user asks for other settings of the same
  session (`ctxsim.replays.background`); the page polling it says so and offers to queue it
  again, and its task finds nothing to do.
- **Helper copies** (an overview column's second task, a corpus sweep's parts but its last)
  are jobs of their own that are not `counted`: the quota counts the work once.
- **Lost jobs.** A job older than `TICKET_SECONDS` is counted no more; a kind's job whose
  worker died is settled by `ctxsim.jobs.lifecycle`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from ctxsim.jobs.models import PENDING, Job

KINDS = ("replay", "overview", "sweep", "corpus", "trace", "insights", "call")
UNCOUNTED = ("import",)
TICKET_SECONDS = 3600
RETRY_AFTER_SECONDS = 10


class QueueFull(Exception):
    """A request would queue more background work than its user or team may have pending
    (or, `ctxsim.replays.limits.ReplayBusy`, run more replays at once than its user may)."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message)
        self.message, self.retry_after = message, retry_after


def user_id(user: Any) -> int | None:
    """The user's id, None for anonymous or no user (commands, the worker)."""
    return getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None


def _team_id(team: Any) -> int | None:
    return getattr(team, "pk", team)


def _live() -> Any:
    return Job.objects.filter(status__in=PENDING, created_at__gte=timezone.now() - timedelta(
        seconds=TICKET_SECONDS), counted=True).exclude(kind__in=UNCOUNTED)


def pending(user: Any = None, team: Any = None) -> int:
    """Jobs pending for `user` (or, without one, for `team`)."""
    uid = user_id(user)
    if uid is not None:
        return _live().filter(user_id=uid).count()
    return _live().filter(team_id=_team_id(team)).count()


def admit(kind: str, user: Any, team: Any, tasks: int = 1, *, api: bool = False) -> None:
    """Raise QueueFull unless `user` and `team` may queue `tasks` more tasks of `kind`; a
    request with an API token (`api`, no user) is held to its team's quota. Work nobody
    asked for (commands, the worker itself: no user, no token) is never refused."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r}")
    uid = user_id(user)
    if (uid is None and not api) or tasks <= 0:
        return
    per_user = settings.CTXSIM_PENDING_PER_USER
    mine = _live().filter(user_id=uid).count() if uid is not None else 0
    if uid is not None and mine + tasks > per_user:
        raise QueueFull(
            f"You already have {mine} background task(s) waiting for the worker (at most "
            f"{per_user} per user); this {kind} is queued once one of them is done. Retry in "
            "a few seconds.")
    per_team = settings.CTXSIM_PENDING_PER_TEAM
    theirs = _live().filter(team_id=_team_id(team)).count()
    if theirs + tasks > per_team:
        raise QueueFull(
            f"Your team already has {theirs} background task(s) waiting for the worker (at "
            f"most {per_team} per team); this {kind} is queued once some of them are done. "
            "Retry in a few seconds.")


class QueueFullMiddleware:
    """Answers QueueFull (and so ReplayBusy) from any view with a 429, its Retry-After and its
    sentence."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not isinstance(exception, QueueFull):
            return None
        response = HttpResponse(exception.message + "\n", status=429,
                                content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(exception.retry_after)
        return response
