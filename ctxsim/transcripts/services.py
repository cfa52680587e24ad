"""What the transcript views do: list a team's sessions, import uploads, run background jobs.

Views parse the request and render; everything that touches several models or the task queue
lives here. Guarantees:

- every file is imported in its own transaction (`imports.import_transcript`), so a failed
  file, in the request or in the worker, leaves no session, message or content behind;
- a background job's progress and heartbeat are written outside that transaction, so the
  page can watch it, and a worker that dies leaves a job that `fail_stuck_jobs` can find.
"""

from __future__ import annotations

import importlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from ctxsim.importers.errors import TranscriptError
from ctxsim.replays.models import SpilledFile, storage_name_for
from ctxsim.teams.models import Team
from ctxsim.transcripts import search
from ctxsim.transcripts.imports import import_transcript
from ctxsim.transcripts.models import Content, ImportJob, Message, Session

logger = logging.getLogger(__name__)

SESSIONS_PER_PAGE = 50
DEFAULT_IMPORT_TIMEOUT_SECONDS = 600
# Share of the progress bar given to reading the file; saving and replay stats take the rest.
READ_SHARE = 90


# -- the sessions list -------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFilters:
    format: str = ""
    status: str = ""
    query: str = ""
    contents: bool = False  # the query also searches inside contents and tool-call arguments


def team_formats(team: Team) -> list[str]:
    """The formats the team's sessions have, for the filter's choices."""
    return list(
        Session.objects.filter(team=team).order_by("format").values_list("format", flat=True)
        .distinct()
    )


def list_sessions(team: Team, filters: SessionFilters, page: str | int | None) -> Page:
    """One page of the team's top-level sessions, each with its sidechains prefetched.

    Sidechains are listed under their parent, so filters and search pick the parent when the
    parent or one of its sidechains matches.
    """
    sidechains = Session.objects.select_related("uploaded_by").order_by("created_at", "pk")
    rows = (
        Session.objects.filter(team=team, parent__isnull=True)
        .select_related("uploaded_by")
        .prefetch_related(Prefetch("sidechains", queryset=sidechains))
    )
    if filters.format:
        rows = rows.filter(Q(format=filters.format) | Q(sidechains__format=filters.format))
    if filters.status:
        rows = rows.filter(review_status=filters.status)
    if filters.query:
        match = (Q(title__icontains=filters.query) | Q(sidechains__title__icontains=filters.query)
                 | Q(source_name__icontains=filters.query))
        if filters.contents and len(filters.query) >= search.MIN_QUERY_CHARS:
            holding = search.matching_session_ids(team, filters.query)
            match |= Q(pk__in=holding) | Q(sidechains__pk__in=holding)
        rows = rows.filter(match)
    if filters.format or filters.query:
        rows = rows.distinct()
    return Paginator(rows.order_by("-created_at", "-pk"), SESSIONS_PER_PAGE).get_page(page)


# -- uploads -----------------------------------------------------------------------------------


@dataclass
class FileResult:
    """What happened to one uploaded file: sessions, an error line, or a background job."""

    name: str
    size: int
    sessions: list[Session] = field(default_factory=list)
    format: str = ""
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    job: ImportJob | None = None

    @property
    def totals(self) -> dict[str, int]:
        return session_totals(self.sessions)


def session_totals(sessions: Iterable[Session]) -> dict[str, int]:
    rows = list(sessions)
    return {
        "sessions": len(rows),
        "tool_calls": sum(r.tool_call_count for r in rows),
        "tool_results": sum(r.tool_result_count for r in rows),
    }


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def size_limit_text() -> str:
    return _megabytes(settings.CTXSIM_MAX_UPLOAD_BYTES)


def size_error(size: int) -> str:
    """The message for a file over the upload limit, or "" (checked before reading a byte)."""
    limit = settings.CTXSIM_MAX_UPLOAD_BYTES
    if size > limit:
        return f"the file is {_megabytes(size)}, over the {_megabytes(limit)} limit"
    return ""


def import_uploads(
    files: Sequence[UploadedFile], *, team: Team, user, format: str = ""
) -> list[FileResult]:
    """Import each file: small ones now, large ones by the worker; one result per file."""
    results = []
    for upload in files:
        name = upload.name or "upload"
        result = FileResult(name=name, size=upload.size or 0)
        result.error = size_error(result.size)
        if result.error:
            results.append(result)
            continue
        if result.size > settings.CTXSIM_BACKGROUND_IMPORT_BYTES:
            result.job = queue_import(upload, team=team, user=user, format=format)
        else:
            _import_now(upload, result, team=team, user=user, format=format)
        results.append(result)
    return results


def _import_now(upload: UploadedFile, result: FileResult, *, team, user, format: str) -> None:
    try:
        upload.open("rb")
        outcome = import_transcript(
            upload.file, team=team, user=user, format=format or None, source_name=result.name
        )
    except TranscriptError as error:
        result.error = str(error)
        return
    except OSError as error:
        result.error = f"the upload cannot be read ({error.strerror or error})"
        return
    fill_default_stats(outcome.sessions)
    result.sessions = list(outcome.sessions)
    result.format = outcome.format
    result.warnings = outcome.warnings


def fill_default_stats(rows: Iterable[Session]) -> None:
    """Replay each new session with the default profile to fill its peak tokens and errors.

    The replay service belongs to the replays app and may not exist yet; without it the
    fields stay empty and the list shows "—". A failing replay never fails the import.
    """
    try:
        replay_services = importlib.import_module("ctxsim.replays.services")
    except ImportError:
        return
    compute = getattr(replay_services, "compute_default_stats", None)
    if compute is None:
        return
    for row in rows:
        try:
            compute(row)
        except Exception:
            logger.exception("computing the default replay stats of session %s failed", row.pk)


# -- background imports ------------------------------------------------------------------------


def queue_import(upload: UploadedFile, *, team: Team, user, format: str = "") -> ImportJob:
    """Store the upload, create its job and enqueue the worker task."""
    # The stored name never contains the user's file name: it is untrusted and only displayed.
    stored = default_storage.save(f"uploads/{uuid.uuid4().hex}.upload", upload)
    job = ImportJob.objects.create(
        team=team,
        user=user if getattr(user, "is_authenticated", False) else None,
        file_name=(upload.name or "upload")[:500],
        size=upload.size or 0,
        stored_name=stored,
        format=format,
    )
    enqueue(job)
    return job


def enqueue(job: ImportJob) -> None:
    """Hand the job to the task backend once the job row is committed (the worker reads it)."""
    from ctxsim.transcripts.tasks import run_import  # the task module imports this one

    def send() -> None:
        result = run_import.enqueue(job.pk, job.attempts)
        ImportJob.objects.filter(pk=job.pk).update(task_id=str(result.id)[:64])

    transaction.on_commit(send)


def requeue(job: ImportJob) -> str:
    """Put a failed job back in the queue; returns "" or why it cannot be re-queued."""
    if job.status != ImportJob.Status.FAILED:
        return "only failed imports can be re-queued"
    if not job.stored_name or not default_storage.exists(job.stored_name):
        return "the uploaded file is no longer stored; upload it again"
    job.status = ImportJob.Status.QUEUED
    job.attempts += 1
    job.progress = 0
    job.message = ""
    job.session_ids = []
    job.started_at = job.finished_at = job.heartbeat_at = None
    job.save()
    enqueue(job)
    return ""


class ProgressStream:
    """A binary stream that reports how far into the file the importer has read.

    It forwards what the importers' `Source` uses (read, readline, iteration, seek, tell) and
    reports the furthest offset reached, since the importer rewinds after probing the head.
    """

    def __init__(self, raw: IO[bytes], size: int, report: Callable[[int], None]):
        self._raw = raw
        self._size = max(size, 1)
        self._report = report
        self._offset = 0
        self._furthest = 0

    def _advance(self, data: bytes) -> bytes:
        self._offset += len(data)
        if self._offset > self._furthest:
            self._furthest = self._offset
            self._report(min(100, self._furthest * 100 // self._size))
        return data

    def read(self, size: int = -1) -> bytes:
        return self._advance(self._raw.read(size))

    def readline(self, size: int = -1) -> bytes:
        return self._advance(self._raw.readline(size))

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        self._offset = self._raw.seek(offset, whence)
        return self._offset

    def tell(self) -> int:
        return self._offset


class JobReporter:
    """Writes a job's progress and heartbeat, throttled: at most every half second, unless the
    bar moved by two points, so a fast import does not turn into thousands of writes."""

    MIN_INTERVAL = 0.5
    MIN_STEP = 2
    HEARTBEAT_EVERY = 5.0

    def __init__(self, job: ImportJob):
        self.job_id = job.pk
        self.last_percent = -1
        self.last_write = 0.0

    def reading(self, percent_of_file: int) -> None:
        self.update(percent_of_file * READ_SHARE // 100)

    def update(self, percent: int, message: str | None = None, *, force: bool = False) -> None:
        now = time.monotonic()
        elapsed = now - self.last_write
        moved = percent - self.last_percent
        due = (moved >= self.MIN_STEP) or (moved > 0 and elapsed >= self.MIN_INTERVAL)
        if not (force or due or elapsed >= self.HEARTBEAT_EVERY):
            return
        fields = {"progress": max(percent, self.last_percent, 0), "heartbeat_at": timezone.now()}
        if message is not None:
            fields["message"] = message
        ImportJob.objects.filter(pk=self.job_id, status=ImportJob.Status.RUNNING).update(**fields)
        self.last_percent = fields["progress"]
        self.last_write = now


def run_import_job(job_id: int, attempt: int | None = None) -> dict:
    """The worker's side of a background import: claim the job, import, record the outcome."""
    now = timezone.now()
    claim = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.QUEUED)
    if attempt is not None:
        claim = claim.filter(attempts=attempt)
    if not claim.update(status=ImportJob.Status.RUNNING, started_at=now, heartbeat_at=now):
        return {"job": job_id, "status": "skipped"}
    job = ImportJob.objects.select_related("team", "user").get(pk=job_id)
    reporter = JobReporter(job)
    reporter.update(0, "reading the file", force=True)
    try:
        with default_storage.open(job.stored_name, "rb") as handle:
            stream = ProgressStream(handle, job.size, reporter.reading)
            reporter_saving = _SavingHint(reporter)
            outcome = import_transcript(
                stream,  # type: ignore[arg-type]
                team=job.team,
                user=job.user,
                format=job.format or None,
                source_name=job.file_name,
                before_save=reporter_saving,
            )
    except TranscriptError as error:
        return _finish(job, ImportJob.Status.FAILED, str(error))
    except OSError as error:
        return _finish(
            job, ImportJob.Status.FAILED, f"the stored upload cannot be read ({error})"
        )
    except Exception as error:  # the job must say it failed, whatever went wrong
        logger.exception("background import %s failed", job_id)
        return _finish(
            job, ImportJob.Status.FAILED, f"the import failed unexpectedly ({type(error).__name__})"
        )
    reporter.update(97, "computing token peaks", force=True)
    fill_default_stats(outcome.sessions)
    ids = [row.pk for row in outcome.sessions]
    message = "; ".join(outcome.warnings)
    result = _finish(job, ImportJob.Status.DONE, message, session_ids=ids)
    # The sessions are stored; the upload is no longer needed (failed jobs keep it to re-queue).
    default_storage.delete(job.stored_name)
    ImportJob.objects.filter(pk=job.pk).update(stored_name="")
    return result


class _SavingHint:
    """Called by `import_transcript` once parsing is over, before the write transaction."""

    def __init__(self, reporter: JobReporter):
        self.reporter = reporter

    def __call__(self) -> None:
        self.reporter.update(READ_SHARE, "saving the sessions", force=True)


def _finish(job: ImportJob, status: str, message: str, *, session_ids=()) -> dict:
    ImportJob.objects.filter(pk=job.pk).update(
        status=status,
        progress=100 if status == ImportJob.Status.DONE else job.progress,
        message=message,
        session_ids=list(session_ids),
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    return {"job": job.pk, "status": status, "sessions": list(session_ids)}


def import_timeout() -> timedelta:
    seconds = getattr(settings, "CTXSIM_IMPORT_TIMEOUT_SECONDS", DEFAULT_IMPORT_TIMEOUT_SECONDS)
    return timedelta(seconds=seconds)


def fail_stuck_jobs(now=None) -> int:
    """Mark jobs "running" without a heartbeat for longer than the timeout as failed.

    A worker killed mid-import rolls its transaction back (no rows), but the job row would say
    "running" forever. Reading first keeps the common case (nothing stuck) free of a write,
    which on SQLite would wait for an import's write transaction.
    """
    now = now or timezone.now()
    timeout = import_timeout()
    cutoff = now - timeout
    stuck = ImportJob.objects.filter(status=ImportJob.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    ids = list(stuck.values_list("pk", flat=True))
    if not ids:
        return 0
    minutes = int(timeout.total_seconds() // 60)
    span = f"{minutes} min" if minutes else f"{int(timeout.total_seconds())} s"
    return ImportJob.objects.filter(pk__in=ids, status=ImportJob.Status.RUNNING).update(
        status=ImportJob.Status.FAILED,
        message=(
            f"the import stopped without finishing (no progress for over {span}; was the "
            "worker stopped?); nothing was stored, re-queue it to try again"
        ),
        finished_at=now,
    )


def jobs_to_show(team: Team, *, besides: Iterable[FileResult] = ()) -> QuerySet[ImportJob]:
    """The team's imports still running and the failed ones, newest first (without the jobs
    this very upload just queued, which its results show)."""
    just_queued = [r.job.pk for r in besides if r.job is not None]
    statuses = [ImportJob.Status.QUEUED, ImportJob.Status.RUNNING, ImportJob.Status.FAILED]
    return (
        ImportJob.objects.filter(team=team, status__in=statuses)
        .exclude(pk__in=just_queued)
        .select_related("user")[:30]
    )


def delete_session(session: Session) -> None:
    """Delete a session with everything hanging off it (sidechains, replays, review), then the
    stored contents and spill files no other session uses: both are shared by hash, so only
    orphans go."""
    sessions, frontier = [session], [session.pk]
    while frontier:
        children = list(Session.objects.filter(parent_id__in=frontier))
        sessions += children
        frontier = [child.pk for child in children]
    content_ids = set(
        Message.objects.filter(session__in=sessions).values_list("content_id", flat=True)
    )
    spill_hashes = set(
        SpilledFile.objects.filter(run__session__in=sessions).values_list("sha256", flat=True)
    )
    with transaction.atomic():
        session.delete()
        still_used = Message.objects.filter(content=OuterRef("pk"))
        Content.objects.filter(pk__in=content_ids).exclude(Exists(still_used)).delete()
        orphans = spill_hashes - set(
            SpilledFile.objects.filter(sha256__in=spill_hashes).values_list("sha256", flat=True)
        )
        # Storage is not transactional: remove files only once the rows are really gone.
        transaction.on_commit(
            lambda: [default_storage.delete(storage_name_for(sha)) for sha in orphans]
        )
