"""The session page's replays of long sessions, handed to the worker (issue 20 item 4).

Four GETs with new thresholds on a 20,000-call session held every request thread for 34 s. A
session with more than CTXSIM_INLINE_REPLAY_CALLS model calls is therefore never replayed on
a request thread when its replay is neither kept by the process nor stored: `pending_for`
queues one `store_replay` task on the `replays` queue (the overview's queue) and the page
answers at once with the replay's progress, polled until the summary is stored. One
`BackgroundReplay` row per (session, run key), created in the transaction that queues its
task, so a second
request — the same user's poll or another reviewer's — joins the pending replay instead of
queueing it again. Shorter sessions replay inline as before.

A row left "running" by a worker that died (no heartbeat for longer than the import timeout)
is settled by the next request that finds it as every kind of job is (`ctxsim.jobs.lifecycle`:
queued again once, then failed); a row marked done whose summary is gone
(dropped by the replay store's bounds) is queued again too, and so is one that failed longer
than that ago (the page says why meanwhile, without polling). The worker writes its progress
and outcome only while the row is still its own attempt (`ctxsim.jobs.lifecycle.run`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.http import QueryDict
from django.tasks import task
from django.utils import timezone

from ctxsim.jobs import lifecycle, policy
from ctxsim.jobs.models import Status
from ctxsim.replays import services as replays
from ctxsim.replays.cache import releases_memory
from ctxsim.replays.models import BackgroundReplay
from ctxsim.replays.state import ReplaySettings, session_settings
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.tasks import import_timeout

logger = logging.getLogger(__name__)

# How often the worker writes a running replay's progress (the page polls every second).
HEARTBEAT_EVERY = 1.0


def inline_bound() -> int:
    """Sessions with more model calls replay in the worker (CTXSIM_INLINE_REPLAY_CALLS)."""
    return django_settings.CTXSIM_INLINE_REPLAY_CALLS


def pending_for(session: Session, settings: ReplaySettings, user: Any = None, *,
                poll: bool = False, together: Iterable[str] = ()) -> BackgroundReplay | None:
    """The background replay a request of `user` for these settings waits for, queued when
    needed; None when the request may go on: a session short enough to replay inline, or a
    summary this process or the database holds.

    Queueing counts as one of the user's pending jobs (`ctxsim.jobs.policy`: QueueFull past
    their or their team's quota); joining a replay already queued takes none. When it queues, the
    user's own replays of this session for other settings that have not started yet are
    dropped first (a newer threshold supersedes an older one: issue 31); a `poll` of the
    pending page never does, and never queues a superseded replay again (the page says it
    was dropped; opening it again queues it). Keys in `together` are asked for by the same
    request (the comparison's two sides) and never supersede each other."""
    keep = {settings.key, *together}
    if session.model_call_count <= inline_bound():
        return None
    if replays.stored_summary(session, settings) is not None:
        return None
    row = BackgroundReplay.objects.filter(session=session, key=settings.key).first()
    if row is None:
        _drop_superseded(session, keep, user)
        policy.admit("replay", user, session.team)
        with transaction.atomic():
            row, created = BackgroundReplay.objects.get_or_create(
                session=session, key=settings.key,
                defaults={"query": settings.query(), "total": session.model_call_count,
                          "user_id": policy.user_id(user)})
            if created:
                enqueue(row)
        return row
    if row.status == Status.DONE:
        if replays.stored_summary(session, settings) is not None:
            return None  # stored between the two reads
        return _queue_again(row, Status.DONE, user)  # stored once, dropped since
    if row.status == Status.RUNNING and lifecycle.settle(among=[row]):
        row.refresh_from_db()  # its worker went away: queued again (or, lost twice, failed)
        return row
    if row.status == Status.FAILED and older(row.finished_at):
        return _queue_again(row, Status.FAILED, user)  # said so for a while; try once more
    if row.status == Status.CANCELLED and not poll:
        return _queue_again(row, Status.CANCELLED, user, keep)  # superseded, asked again
    return row


SUPERSEDED = ("superseded: newer settings of this session were asked for before this replay "
              "started")


def _drop_superseded(session: Session, keep: Iterable[str], user: Any) -> None:
    """Drop (cancel: counted no more by the quotas) the user's queued, not started, replays
    of this session for settings not in `keep`; a started one runs to its end."""
    uid = policy.user_id(user)
    if uid is None:
        return
    BackgroundReplay.objects.filter(session=session, user_id=uid, status=Status.QUEUED).exclude(
        key__in=list(keep)).update(status=Status.CANCELLED, message=SUPERSEDED,
                                   finished_at=timezone.now())


def older(moment) -> bool:
    """Longer ago than the import timeout (a worker that beats no more is gone)."""
    return moment is not None and moment < timezone.now() - import_timeout()


def _queue_again(row: BackgroundReplay, was: str, user: Any = None,
                 keep: Iterable[str] = ()) -> BackgroundReplay:
    """Queue the replay again, once however many requests find it at the same moment: only the
    request whose conditional update wins queues the task."""
    if was == Status.CANCELLED:
        _drop_superseded(row.session, {row.key, *keep}, user)
    policy.admit("replay", user, row.session.team)
    return lifecycle.reopen(row, was, user)


def enqueue(row: BackgroundReplay) -> None:
    """Its task (first queued, queued again by a request, or by `ctxsim.jobs.lifecycle`)."""
    result = store_replay.enqueue(row.session_id, row.key)
    BackgroundReplay.objects.filter(pk=row.pk).update(task_id=str(result.id)[:64])
    row.task_id = str(result.id)[:64]


def progress_of(row: BackgroundReplay) -> dict[str, Any]:
    """What the pending page says: "queued", or "N of M calls", or why it failed."""
    return {"status": row.status, "done": row.done, "total": row.total,
            "percent": row.percent, "failed": row.status == Status.FAILED,
            "superseded": row.status == Status.CANCELLED, "message": row.message}


# --- the worker's side ---------------------------------------------------------------------


@task(queue_name="replays")
@releases_memory
def store_replay(session_id: int, key: str) -> dict:
    """Replay a stored session under the settings of its `BackgroundReplay` row and store the
    summary, as the session page would have."""
    return run_background_replay(session_id, key)


def run_background_replay(session_id: int, key: str) -> dict:
    return lifecycle.run(BackgroundReplay, _replay, every=HEARTBEAT_EVERY,
                         session_id=session_id, key=key)


def _replay(row: BackgroundReplay, attempt: lifecycle.Attempt) -> dict:
    settings, _ = session_settings(QueryDict(row.query), row.session)
    if settings.key != row.key:
        raise ValueError("the settings changed before the replay ran (a team profile was "
                         "edited or deleted); open the page again")
    run = replays.summary_for(row.session, settings, progress=attempt.progress)
    from ctxsim.replays import deep_calls  # it hands deep calls on like this module

    # The call the page opens on, while this replay holds it (issue 28 item 4).
    deep_calls.keep_default_call(row.session, settings, run)
    attempt.finish(Status.DONE, done=len(run.calls))
    return {"status": "done", "calls": len(run.calls)}
