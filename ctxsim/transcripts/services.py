"""What the transcript views do: import uploads, queue background jobs, and (from `listing`)
list a team's sessions.

Views parse the request and render; everything that touches several models or the task queue
lives here (the worker's side of a job is `tasks.py`, which this module imports, never the
other way round). Guarantees:

- every file is imported in its own transaction (`imports.import_transcript`), so a failed
  file, in the request or in the worker, leaves no session, message or content behind;
- a worker that dies leaves a job that `fail_stuck_jobs` can find (see `tasks.JobReporter`).

Other apps follow imports and deletions through `transcripts.signals`; this app imports none
of them.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from ctxsim.importers.errors import TranscriptError
from ctxsim.teams.models import Team
from ctxsim.transcripts import bundles, claims, redaction
from ctxsim.transcripts.imports import finish_import, import_transcript
from ctxsim.transcripts.listing import (
    SessionFilters,
    filter_sessions,
    list_sessions,
    session_totals,
    team_formats,
)
from ctxsim.transcripts.models import Content, ImportJob, Message, Session
from ctxsim.transcripts.signals import session_deleting
from ctxsim.transcripts.tasks import (
    ProgressStream,
    enqueue,
    fail_stuck_jobs,
    import_timeout,
    run_import_job,
)

__all__ = [
    "FileResult", "SessionFilters", "already_imported", "delete_session", "discard_kept",
    "enqueue", "fail_stuck_jobs", "filter_sessions", "import_kept", "import_timeout",
    "import_uploads", "jobs_to_show", "list_sessions", "queue_import", "rename_session",
    "requeue", "run_import_job", "session_totals", "size_error", "size_limit_text",
    "team_formats",
]


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
    # The facts behind `error` (for an unknown format: why each format did not match).
    error_details: list[str] = field(default_factory=list)
    job: ImportJob | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    sha256: str = ""
    # The same bytes are already in the team: that session, and the copy kept (in the default
    # storage, redacted as a background upload is) in case the user imports them again anyway.
    duplicate: Session | None = None
    kept: str = ""
    kept_redactions: dict[str, int] = field(default_factory=dict)

    @property
    def totals(self) -> dict[str, int]:
        return session_totals(self.sessions)


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


def upload_sha256(upload: UploadedFile) -> str:
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    return digest.hexdigest()


def already_imported(team: Team, sha256: str) -> Session | None:
    """The team's first top-level session imported from a file with these bytes."""
    if not sha256:
        return None
    return (Session.objects.filter(team=team, source_sha256=sha256, parent__isnull=True)
            .order_by("pk").first())


def import_uploads(
    files: Sequence[UploadedFile], *, team: Team, user, format: str = ""
) -> list[FileResult]:
    """Import each file: small ones now, large ones by the worker; one result per file.

    Files that make up one multi-file transcript (Claude Code's request bodies, a Cline / Roo
    Code task folder, an OpenHands V1 conversation, OpenCode's storage, a `codex exec` stream
    with its rollout: `bundles`) uploaded together are imported as one archive. A file
    whose bytes the team already holds is not imported: its result names the session, and a
    copy is kept for `import_kept` ("import again"; none for an archive of a team that
    redacts, which cannot be stored redacted)."""
    results = []
    bundle = bundles.bundle_name(files)
    if bundle is not None:
        packed = bundles.pack(files, settings.CTXSIM_MAX_UPLOAD_BYTES, bundle)
        if packed is None:
            total = sum(f.size or 0 for f in files)
            return [FileResult(name=bundle, size=total, error=size_error(total))]
        files = [packed]
    for upload in files:
        name = upload.name or "upload"
        result = FileResult(name=name, size=upload.size or 0)
        result.error = size_error(result.size)
        if result.error:
            results.append(result)
            continue
        try:
            result.sha256 = upload_sha256(upload)
        except OSError as error:
            result.error = f"the upload cannot be read ({error.strerror or error})"
            results.append(result)
            continue
        try:
            # One request at a time imports these bytes: a concurrent upload of the same file
            # waits here, then finds the first one's session (or job) as a duplicate.
            with claims.claimed(team, result.sha256):
                _import_upload(upload, result, team=team, user=user, format=format)
        except claims.Busy as busy:
            result.error = str(busy)
        results.append(result)
    return results


def _import_upload(upload: UploadedFile, result: FileResult, *, team: Team, user,
                   format: str) -> None:
    result.duplicate = already_imported(team, result.sha256)
    if result.duplicate is None:
        result.job = _active_job(team, result.sha256)
        if result.job is not None:
            return
    background = (result.size > settings.CTXSIM_BACKGROUND_IMPORT_BYTES
                  and not _archive(upload))
    if result.duplicate is None and not background:
        upload.open("rb")
        _import_now(upload.file, result, team=team, user=user, format=format)
        return
    try:
        if result.duplicate is not None:
            if not (_archive(upload) and getattr(team, "redact_secrets", True)):
                result.kept, result.kept_redactions = _store_upload(upload, team)
        else:
            result.job = queue_import(upload, team=team, user=user, format=format,
                                      sha256=result.sha256)
    except OSError as error:
        result.error = f"the upload could not be stored ({error.strerror or error})"


def _active_job(team: Team, sha256: str) -> ImportJob | None:
    """A queued or running import of these bytes in the team (a second upload joins it)."""
    return (ImportJob.objects.filter(team=team, sha256=sha256,
                                     status__in=[ImportJob.Status.QUEUED,
                                                 ImportJob.Status.RUNNING])
            .order_by("pk").first())


def import_kept(kept: str, *, name: str, size: int, sha256: str, team: Team, user,
                format: str = "", redactions: dict[str, int] | None = None) -> FileResult:
    """Import a copy kept by `import_uploads` (the user chose "import again"): now, or by the
    worker when large (the job then owns the copy). Returns the file's result."""
    result = FileResult(name=name, size=size, sha256=sha256)
    if size > settings.CTXSIM_BACKGROUND_IMPORT_BYTES:
        result.job = _create_job(kept, team=team, user=user, name=name, size=size,
                                 format=format, sha256=sha256, redactions=redactions or {})
        return result
    try:
        with default_storage.open(kept, "rb") as handle:
            # Read as the worker reads a stored upload: handed the storage's File object
            # itself, the importers took one JSON transcript for two JSON Lines sessions.
            stream = ProgressStream(handle, size, lambda _percent: None)
            _import_now(stream, result, team=team, user=user, format=format,
                        redactions=redactions)
    except OSError as error:
        result.error = f"the kept copy cannot be read ({error.strerror or error})"
    discard_kept(kept)
    return result


def discard_kept(kept: str) -> None:
    if kept and default_storage.exists(kept):
        default_storage.delete(kept)


def _archive(upload: UploadedFile) -> bool:
    # An archive cannot be redacted line by line before it is stored: it is imported now.
    try:
        upload.open("rb")
        return redaction.is_archive(upload.file)
    except OSError:
        return False


def _import_now(source, result: FileResult, *, team, user, format: str,
                redactions: dict[str, int] | None = None) -> None:
    try:
        outcome = import_transcript(
            source, team=team, user=user, format=format or None, source_name=result.name,
            source_sha256=result.sha256, redactions=redactions,
        )
    except TranscriptError as error:
        result.error = str(error)
        result.error_details = list(error.details)
        return
    except OSError as error:
        result.error = f"the upload cannot be read ({error.strerror or error})"
        return
    finish_import(outcome.sessions)
    result.sessions = list(outcome.sessions)
    result.format = outcome.format
    result.warnings = outcome.warnings
    result.redactions = outcome.redactions


# -- background imports ------------------------------------------------------------------------


def _store_upload(upload: UploadedFile, team: Team) -> tuple[str, dict[str, int]]:
    """Store an upload (its secrets replaced first when the team redacts); returns the stored
    name and what was replaced."""
    counts: dict[str, int] = {}
    content = upload
    if getattr(team, "redact_secrets", True):
        upload.open("rb")
        content, counts = redaction.redacted_copy(upload.file)
    # The stored name never contains the user's file name: it is untrusted and only displayed.
    name = f"uploads/{uuid.uuid4().hex}.upload"
    try:
        try:
            stored = default_storage.save(name, content)
        finally:
            if content is not upload:
                content.close()
    except BaseException:
        # A full disk leaves part of the file under its name, and a file nothing refers to is
        # never cleaned up: remove it (issue 20 item 13).
        with contextlib.suppress(Exception):
            default_storage.delete(name)
        raise
    return stored, counts


def queue_import(upload: UploadedFile, *, team: Team, user, format: str = "",
                 sha256: str = "", origin: dict[str, str] | None = None) -> ImportJob:
    """Store the upload (its secrets replaced first when the team redacts), create its job and
    enqueue the worker task."""
    stored, counts = _store_upload(upload, team)
    try:
        return _create_job(stored, team=team, user=user, name=upload.name or "upload",
                           size=upload.size or 0, format=format, sha256=sha256,
                           redactions=counts, origin=origin)
    except BaseException:
        # A stored file no job row refers to would never be cleaned up (a job that exists keeps
        # its file, to be re-queued).
        with contextlib.suppress(Exception):
            if not ImportJob.objects.filter(stored_name=stored).exists():
                default_storage.delete(stored)
        raise


def _create_job(stored: str, *, team: Team, user, name: str, size: int, format: str,
                sha256: str, redactions: dict[str, int],
                origin: dict[str, str] | None = None) -> ImportJob:
    job = ImportJob.objects.create(
        origin=origin or {},
        redactions=redactions,
        team=team,
        user=user if getattr(user, "is_authenticated", False) else None,
        file_name=redaction.displayed_name(name, team)[:500],
        size=size,
        stored_name=stored,
        format=format,
        sha256=sha256,
        total=100,  # percent
    )
    enqueue(job)
    return job


def requeue(job: ImportJob) -> str:
    """Put a failed job back in the queue; returns "" or why it cannot be re-queued."""
    if job.status != ImportJob.Status.FAILED:
        return "only failed imports can be re-queued"
    if not job.stored_name or not default_storage.exists(job.stored_name):
        return "the uploaded file is no longer stored; upload it again"
    job.status = ImportJob.Status.QUEUED
    job.attempts += 1
    job.done = 0
    job.message = ""
    job.session_ids = []
    job.started_at = job.finished_at = job.heartbeat_at = None
    job.save()
    enqueue(job)
    return ""


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


TITLE_MAX = Session._meta.get_field("title").max_length


def rename_session(session: Session, title: str) -> str:
    """Give the session this title (spaces around it dropped); returns "" or why not."""
    title = " ".join(title.split())
    if not title:
        return "a title cannot be empty"
    if len(title) > TITLE_MAX:
        return f"a title has {TITLE_MAX} characters at most"
    session.title = title
    session.save(update_fields=["title"])
    return ""


def delete_session(session: Session) -> None:
    """Delete a session with everything hanging off it (sidechains, replays, review), then the
    stored contents no other session uses (contents are shared by hash, so only orphans go).
    Apps that keep files for the session (replays' spills) clean up on `session_deleting`."""
    sessions, frontier = [session], [session.pk]
    while frontier:
        children = list(Session.objects.filter(parent_id__in=frontier))
        sessions += children
        frontier = [child.pk for child in children]
    content_ids = set(
        Message.objects.filter(session__in=sessions).values_list("content_id", flat=True)
    )
    with transaction.atomic():
        session_deleting.send(sender=Session, session=session, sessions=sessions)
        session.delete()
        still_used = Message.objects.filter(content=OuterRef("pk"))
        Content.objects.filter(pk__in=content_ids).exclude(Exists(still_used)).delete()
