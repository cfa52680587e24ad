"""Fair, bounded background work (issue 28 item 1): the one place the quotas live.

Imports have a queue and a worker of their own (`bin/run-dev`, `bin/serve-prod`): nothing
below limits them. Replays, overview figures, sweeps and traces a request asks the worker
for are *tickets* (`models.Ticket`, one per queued task, given back when it ends):

- **Quotas.** One user may have `CTXSIM_PENDING_PER_USER` tickets pending, one team
  `CTXSIM_PENDING_PER_TEAM`, counted over every kind together. A request that would queue
  past either is refused before anything is queued: `QueueFull`, which the middleware
  answers with a 429, a `Retry-After` and one sentence saying which limit and how to go on.
  (Before: a viewer's 20 overview GETs with new thresholds queued 131 tasks and another
  team's import waited behind them for 8 minutes.)
- **Joining.** A request for work already queued (the same session and settings, the same
  overview column) joins it and takes no ticket: each kind keeps one row per
  (subject, settings) with its task (`BackgroundReplay`, `SessionFigures`, …).
- **Superseding** (issue 31). A background replay still *queued* for a user is dropped when
  the same user asks for other settings of the same session (`superseded`): its ticket is
  given back, its row says "superseded by newer settings" (the page polling it says so and
  offers to queue it again), and its task finds nothing to do.
- **Lost tickets.** A ticket older than `TICKET_SECONDS` is counted no more: its worker was
  killed before the task could end (the job rows are settled by their own heartbeats).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from ctxsim.jobs.models import Ticket

KINDS = ("replay", "overview", "sweep", "trace", "insights")
TICKET_SECONDS = 3600
RETRY_AFTER_SECONDS = 10


class QueueFull(Exception):
    """A request would queue more background work than its user or team may have pending."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message)
        self.message, self.retry_after = message, retry_after


def user_id(user: Any) -> int | None:
    """The user's id, None for anonymous or no user (commands, the worker)."""
    return getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None


def _team_id(team: Any) -> int | None:
    return getattr(team, "pk", team)


def _live() -> Any:
    return Ticket.objects.filter(created_at__gte=timezone.now() - timedelta(
        seconds=TICKET_SECONDS))


def pending(user: Any = None, team: Any = None) -> int:
    """Tickets pending for `user` (or, without one, for `team`)."""
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


def record(kind: str, user: Any, team: Any, task_ids: Iterable[Any], *, subject: str = "",
           key: str = "", api: bool = False) -> None:
    """One ticket per task just queued for `user` or, by an API token (`api`), for `team`
    (nothing for work nobody asked for)."""
    uid = user_id(user)
    if uid is None and not api:
        return
    Ticket.objects.bulk_create([
        Ticket(kind=kind, user_id=uid, team_id=_team_id(team), subject=subject,
               key=key[:200], task_id=str(task_id)[:64]) for task_id in task_ids])


def release(task_ids: Iterable[Any]) -> int:
    """Give back the tickets of these tasks (ended, settled or dropped)."""
    ids = [str(t)[:64] for t in task_ids if t]
    if not ids:
        return 0
    return Ticket.objects.filter(task_id__in=ids).delete()[0]


def superseded(kind: str, user: Any, subject: str, keep: Iterable[str]) -> list[Ticket]:
    """The user's pending tickets of `kind` on `subject` for other settings than those in
    `keep`: what a newer request of theirs supersedes (the caller drops the ones whose task
    has not started, then `release`s them)."""
    uid = user_id(user)
    if uid is None:
        return []
    return list(_live().filter(kind=kind, user_id=uid, subject=subject).exclude(
        key__in=[key[:200] for key in keep]))


class QueueFullMiddleware:
    """Answers QueueFull from any view with a 429, its Retry-After and its sentence."""

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
