"""Traces bounded (issue 28 items 2 and 4): a size estimate before any replay, a temp-space
check, and the worker for long sessions.

The full trace holds every history sent, so it grows with the square of a session's calls:
a viewer's full trace of a 991-call session filled 4 GB of temp space in 67 s, then a 500.
Now, for the download and for `/api/v1/sessions/{id}/trace` alike:

- `estimate_bytes` says how large the trace will be before anything is replayed: each call
  holds the history after each of its stages, so from the stored summary when there is one
  (the tokens each call sends, at the session's bytes per token, plus JSON's overhead per
  message, once per stage), else from the raw session (each call's history at most the
  whole session's bytes, half of it on average; over the limit, the summary is replayed
  first where a replay may run, and the trace measured from it). Over
  `CTXSIM_TRACE_MAX_BYTES` the answer is a 413 that says the estimate and links the summary
  trace (`TraceTooLarge`).
- Writing needs about twice the trace in temp space (its calls are spooled, then copied);
  with less free, a 507 says so before anything is written (`NoTempSpace`).
- A session longer than `CTXSIM_INLINE_REPLAY_CALLS` is never replayed by the request: the
  trace is written by the worker (`write_trace_file`, queue "replays", one of the user's
  pending jobs), into the default storage, and the request answers 202 with its progress until
  the file is there; then the same URL serves it. Files are kept `KEEP_SECONDS`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from datetime import timedelta
from typing import IO, Any

from django.conf import settings as django_settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.tasks import task
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone

from ctxsim.jobs import lifecycle, policy
from ctxsim.jobs.models import TraceFile
from ctxsim.replays import services
from ctxsim.replays.state import ReplaySettings, session_settings
from ctxsim.transcripts.models import Session

logger = logging.getLogger(__name__)

KEEP_SECONDS = 3600
RETRY_FAILED_SECONDS = 60  # a failed trace says why this long before it is tried again
SUMMARY_BYTES_PER_CALL = 4096
BYTES_PER_MESSAGE = 300  # a history entry's JSON around its content
BYTES_FIXED = 64 * 1024
HEARTBEAT_EVERY = 1.0  # seconds between the worker's beats while it writes a trace


class TraceTooLarge(Exception):
    def __init__(self, estimate: int, limit: int) -> None:
        super().__init__(estimate, limit)
        self.estimate, self.limit = estimate, limit


class NoTempSpace(Exception):
    def __init__(self, needed: int, free: int) -> None:
        super().__init__(needed, free)
        self.needed, self.free = needed, free


def estimate_bytes(session: Session, settings: ReplaySettings, summary: bool) -> int:
    """How large the trace of these settings will be, without replaying."""
    calls = session.model_call_count
    if summary:  # each call's figures, and the final history once
        return int(BYTES_FIXED + SUMMARY_BYTES_PER_CALL * calls + session.total_bytes
                   + session.message_count * BYTES_PER_MESSAGE)
    # Each call holds the history after each of its stages.
    stages = max(1, len(settings.run_config().stages))
    run = services.stored_summary(session, settings)
    if run is not None and run.calls:
        raw = max(1, max(c.get("raw") or 0 for c in run.calls))
        per_token = max(1.0, session.total_bytes / raw)
        sent = sum(c.get("sent") or 0 for c in run.calls)
        messages = sum(c.get("msgs") or 0 for c in run.calls)
        return int(BYTES_FIXED + session.total_bytes
                   + stages * (sent * per_token + messages * BYTES_PER_MESSAGE))
    return int(BYTES_FIXED + session.total_bytes + stages * calls * (
        session.total_bytes / 2 + session.message_count * BYTES_PER_MESSAGE / 2))


def check_bounds(session: Session, settings: ReplaySettings, summary: bool, user: Any = None,
                 *, may_replay: bool = True) -> int:
    """The estimate, or TraceTooLarge / NoTempSpace before the trace is written.

    The raw estimate knows nothing of what the profile cuts; when it is over the limit and no
    summary is stored, the summary is replayed first (`may_replay`: a short session in the
    request, one of `user`'s replays; the worker) and the trace measured from it. A request
    that may not replay leaves that to the worker, which checks again."""
    estimate = estimate_bytes(session, settings, summary)
    limit = django_settings.CTXSIM_TRACE_MAX_BYTES
    if estimate > limit and not summary and services.stored_summary(session,
                                                                     settings) is None:
        if not may_replay:
            return estimate
        services.summary_for(session, settings, user=user)
        estimate = estimate_bytes(session, settings, summary)
    if estimate > limit:
        raise TraceTooLarge(estimate, limit)
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if 2 * estimate > free:
        raise NoTempSpace(2 * estimate, free)
    return estimate


def inline(session: Session) -> bool:
    return session.model_call_count <= django_settings.CTXSIM_INLINE_REPLAY_CALLS


def trace_file_for(session: Session, settings: ReplaySettings, summary: bool, user: Any = None,
                   *, api: bool = False) -> TraceFile:
    """The worker's trace of these settings: done (its file stored), or queued or running
    (queued now when needed, one of `user`'s pending jobs, or the API token's team's)."""
    _forget_old(session)
    row = TraceFile.objects.filter(session=session, key=settings.key, summary=summary).first()
    if row is not None and row.status == TraceFile.Status.DONE and not default_storage.exists(
            row.stored_name):
        row.delete()
        row = None
    if row is not None and row.status == TraceFile.Status.RUNNING and lifecycle.settle(
            among=[row]):
        row.refresh_from_db()  # lost its worker: queued again (or, lost twice, failed)
    failed_a_while_ago = (row is not None and row.status == TraceFile.Status.FAILED
                          and row.finished_at is not None
                          and row.finished_at < timezone.now() - timedelta(
                              seconds=RETRY_FAILED_SECONDS))
    if row is not None and failed_a_while_ago:
        row.delete()  # said so for a while: asked again, written again
        row = None
    if row is not None:
        return row
    policy.admit("trace", user, session.team, api=api)
    with transaction.atomic():
        row, created = TraceFile.objects.get_or_create(
            session=session, key=settings.key, summary=summary,
            defaults={"query": settings.query(), "total": session.model_call_count,
                      "user_id": policy.user_id(user)})
        if created:
            _enqueue(row)
    return row


def _enqueue(row: TraceFile) -> None:
    result = write_trace_file.enqueue(row.pk)
    row.task_id = str(result.id)[:64]
    TraceFile.objects.filter(pk=row.pk).update(task_id=row.task_id)


def enqueue_again(row: TraceFile) -> None:
    """Its task again, after `ctxsim.jobs.lifecycle` re-queued it."""
    _enqueue(row)


def trace_timeout() -> timedelta:
    """A trace silent this long lost its worker (the import timeout)."""
    return timedelta(seconds=django_settings.CTXSIM_IMPORT_TIMEOUT_SECONDS)


def download(request: HttpRequest, session: Session, settings: ReplaySettings,
             summary: bool) -> tuple[IO[bytes] | None, HttpResponse | None]:
    """The trace download's file, or the answer in its place: 413 over the bound (with the
    summary's link), 507 without the temp space, 202 while the worker writes it."""
    summary_url = f"{reverse('session-trace', args=[session.pk])}?{settings.query()}&summary=1"
    try:
        check_bounds(session, settings, summary, request.user, may_replay=inline(session))
    except TraceTooLarge as exc:
        return None, HttpResponse(f"{too_large_message(exc)}\nSummary: {summary_url}\n",
                                  status=413, content_type="text/plain; charset=utf-8")
    except NoTempSpace as exc:
        return None, HttpResponse(no_space_message(exc) + "\n", status=507,
                                  content_type="text/plain; charset=utf-8")
    if inline(session):
        return services.trace_file(session, settings, summary=summary, user=request.user), None
    row = trace_file_for(session, settings, summary, request.user)
    if row.status == TraceFile.Status.DONE:
        return default_storage.open(row.stored_name, "rb"), None
    return None, render(request, "replays/trace_pending.html", {
        "session": session, "trace": row, "progress": progress_of(row), "summary": summary,
        "summary_url": summary_url, "bound": django_settings.CTXSIM_INLINE_REPLAY_CALLS},
        status=waiting_status(row))


def waiting_status(row: TraceFile) -> int:
    """202 while the worker writes the trace; 422 once it failed (the message says why)."""
    return 422 if row.status == TraceFile.Status.FAILED else 202


def _forget_old(session: Session) -> None:
    old = TraceFile.objects.filter(session=session, finished_at__lt=timezone.now() - timedelta(
        seconds=KEEP_SECONDS))
    for row in old:
        if row.stored_name:
            default_storage.delete(row.stored_name)
    old.delete()


def progress_of(row: TraceFile) -> dict[str, Any]:
    return {"status": row.status, "total": row.total, "failed":
            row.status == TraceFile.Status.FAILED, "message": row.message}


# --- the worker's side ---------------------------------------------------------------------


@task(queue_name="replays")
def write_trace_file(row_id: int) -> dict:
    """Write a session's trace under its row's settings into the default storage."""
    return lifecycle.run(TraceFile, _write, every=HEARTBEAT_EVERY, pk=row_id)


def _write(row: TraceFile, attempt: lifecycle.Attempt) -> dict:
    settings, _ = session_settings(QueryDict(row.query), row.session)
    if settings.key != row.key:
        raise ValueError("the settings changed before the trace was written (a team "
                         "profile was edited or deleted); ask for it again")
    try:
        check_bounds(row.session, settings, row.summary)
    except TraceTooLarge as exc:
        attempt.finish(TraceFile.Status.FAILED, too_large_message(exc))
        return {"status": "failed"}
    with services.trace_file(row.session, settings, summary=row.summary) as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        name = default_storage.save(
            f"traces/{row.session_id}-{row.key[:16]}-{'summary' if row.summary else 'full'}"
            ".json", File(handle))
    if not attempt.finish(TraceFile.Status.DONE, stored_name=name, size=size, done=row.total):
        default_storage.delete(name)  # given up meanwhile: nothing points to the file
    return {"status": "done", "bytes": size}


def too_large_message(exc: TraceTooLarge) -> str:
    size, limit = filesizeformat(exc.estimate), filesizeformat(exc.limit)
    return (f"The full trace of this session would be about {size}, more than the {limit} a "
            "trace may take (CTXSIM_TRACE_MAX_BYTES). Download the summary trace instead "
            "(summary=1: every call's figures, no histories).")


def no_space_message(exc: NoTempSpace) -> str:
    needed, free = filesizeformat(exc.needed), filesizeformat(exc.free)
    return (f"Writing this trace needs about {needed} of temporary space and {free} is free; "
            "try the summary trace (summary=1), or later.")
