"""`POST /api/v1/transcripts`: read the body, answer a repeat from its SHA-256, import the file
now or queue it, and settle a resumed session (`session_key`) against its earlier uploads.

Guarantees (SPEC §12):
- the body is read at most once into a temporary file, never past the upload limit (413);
- a file that fails to import leaves nothing behind (the importer's transaction), and the
  answer is the upload page's one-line message (400);
- the same bytes again give the sessions stored the first time (200), without a new import;
- a new file with the same `session_key` replaces the earlier sessions when nobody has
  commented on or reviewed them, else it is stored beside them, linked (`previous`).
"""

from __future__ import annotations

import gzip
import hashlib
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import IO

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest

from ctxsim.api import adapters
from ctxsim.api.models import ApiToken, ReceivedFile
from ctxsim.importers.errors import TranscriptError
from ctxsim.importers.redact import redact_text
from ctxsim.transcripts.models import ImportJob, ReviewStatus, Session

CHUNK = 1024 * 1024


class IngestError(Exception):
    """A request the API refuses: the HTTP status and the one-line message."""

    def __init__(self, status: int, message: str, details: tuple[str, ...] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


@dataclass
class Received:
    status: int  # 200 repeat, 201 imported, 202 queued
    sessions: list[Session] = field(default_factory=list)
    job: ImportJob | None = None
    format: str = ""
    warnings: list[str] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)
    record: ReceivedFile | None = None


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _too_large(size: int | None = None) -> IngestError:
    limit = settings.CTXSIM_MAX_UPLOAD_BYTES
    what = f"the file is {_megabytes(size)}" if size else "the file is larger than the limit"
    return IngestError(413, f"{what}, over the {_megabytes(limit)} limit")


def _body_stream(request: HttpRequest) -> tuple[IO[bytes], str]:
    """The uploaded file's stream and its name: multipart `file`, or the raw body."""
    content_type = request.content_type or ""
    if content_type.startswith("multipart/form-data"):
        upload = request.FILES.get("file")
        if upload is None:
            raise IngestError(400, "the multipart body has no `file` field")
        if upload.size is not None and upload.size > settings.CTXSIM_MAX_UPLOAD_BYTES:
            raise _too_large(upload.size)
        upload.open("rb")
        return upload.file, upload.name or ""
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > settings.CTXSIM_MAX_UPLOAD_BYTES:
        raise _too_large(declared)  # refused before a byte is read
    return request, ""  # HttpRequest is a file-like object over the body


def read_body(request: HttpRequest) -> tuple[IO[bytes], str, str, int]:
    """(temporary file, SHA-256, name from multipart, size) of the decoded body.

    `Content-Encoding: gzip` is decompressed on the way; the limit applies to what comes out,
    so a small compressed body cannot expand past it.
    """
    stream, name = _body_stream(request)
    encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding == "gzip":
        stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
    elif encoding not in ("identity", ""):
        raise IngestError(400, f"Content-Encoding {encoding!r} is not supported (use gzip)")
    limit = settings.CTXSIM_MAX_UPLOAD_BYTES
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (returned to the caller, who closes it)
    digest = hashlib.sha256()
    size = 0
    try:
        while chunk := stream.read(CHUNK):
            size += len(chunk)
            if size > limit:
                raise _too_large()
            digest.update(chunk)
            spool.write(chunk)
    except (OSError, EOFError, zlib.error) as error:
        spool.close()
        if encoding == "gzip":
            raise IngestError(400, f"the body is not valid gzip ({error})") from None
        raise IngestError(400, f"the body cannot be read ({error})") from None
    except IngestError:
        spool.close()
        raise
    spool.seek(0)
    return spool, digest.hexdigest(), name, size


def _live_sessions(record: ReceivedFile) -> list[Session]:
    return list(record.sessions.filter(team_id=record.team_id).order_by("pk"))


def _repeat(team, sha256: str) -> Received | None:
    """The answer for bytes this team already sent, when their sessions (or job) still exist."""
    for record in ReceivedFile.objects.filter(team=team, sha256=sha256).select_related("job"):
        if record.outcome == ReceivedFile.Outcome.PENDING and record.job is not None:
            settle(record)
        if record.outcome == ReceivedFile.Outcome.PENDING and record.job is not None:
            return Received(status=202, job=record.job, record=record)
        sessions = _live_sessions(record)
        if sessions:
            return Received(status=200, sessions=sessions, format=sessions[0].format,
                            record=record)
    return None


def receive(
    request: HttpRequest, token: ApiToken, *, format: str = "", name: str = "",
    session_key: str = "",
) -> Received:
    """Handle one POST; raises IngestError for what the API answers with 400 or 413."""
    team = token.team
    settle_finished(team)  # earlier queued imports first, so a session key sees them
    spool, sha256, multipart_name, size = read_body(request)
    with spool:
        if size == 0:
            raise IngestError(400, "the file is empty")
        repeat = _repeat(team, sha256)
        if repeat is not None:
            return repeat
        name = (name or multipart_name or f"api-upload-{sha256[:12]}")[:500]
        if team.redact_secrets:
            name = redact_text(name)[0]
        user = token.created_by
        background = size > settings.CTXSIM_BACKGROUND_IMPORT_BYTES and not adapters.is_archive(
            spool
        )
        if background:
            _check_format(format)
            upload = UploadedFile(file=spool, name=name, size=size)
            job = adapters.queue_import(upload, team=team, user=user, format=format)
            record = ReceivedFile.objects.create(
                team=team, token=token, sha256=sha256, size=size, name=name,
                session_key=session_key, job=job, outcome=ReceivedFile.Outcome.PENDING,
            )
            return Received(status=202, job=job, record=record)
        try:
            outcome = adapters.import_now(spool, team=team, user=user, format=format, name=name)
        except TranscriptError as error:
            raise IngestError(400, str(error), error.details) from None
        except OSError as error:
            reason = error.strerror or error
            raise IngestError(400, f"the upload cannot be read ({reason})") from None
    record = ReceivedFile.objects.create(
        team=team, token=token, sha256=sha256, size=size, name=name, session_key=session_key,
    )
    record.sessions.set(outcome.sessions)
    settle_key(record)
    record.refresh_from_db(fields=["outcome", "previous"])
    return Received(status=201, sessions=list(outcome.sessions), format=outcome.format,
                    warnings=outcome.warnings, redactions=outcome.redactions, record=record)


def _check_format(format: str) -> None:
    from ctxsim.importers import FORMATS

    if format and format not in FORMATS:
        raise IngestError(400, f"unknown format {format!r}; use one of: {', '.join(FORMATS)}")


def _has_review(sessions: list[Session]) -> bool:
    """Whether anyone has commented on or set a status on these sessions."""
    ids = [s.pk for s in sessions]
    reviewed = Session.objects.filter(pk__in=ids).filter(
        ~Q(review_status=ReviewStatus.OPEN) | Q(review_status_by__isnull=False)
        | Q(comments__isnull=False)
    )
    return reviewed.exists()


def settle_key(record: ReceivedFile) -> None:
    """Replace or link the uploads of the record's session key (SPEC §12).

    The newest settled upload of a key wins, whichever finished importing last: a queued
    import that ends after a newer file was imported directly is the one replaced.
    """
    if not record.session_key:
        return
    group = list(
        ReceivedFile.objects.filter(team_id=record.team_id, session_key=record.session_key)
        .exclude(outcome__in=[ReceivedFile.Outcome.PENDING, ReceivedFile.Outcome.FAILED])
        .order_by("-pk")
    )
    if len(group) < 2:
        return
    newest, older = group[0], group[1:]
    old = list(
        Session.objects.filter(team_id=record.team_id, received_files__in=older)
        .exclude(pk__in=newest.sessions.values("pk"))
        .distinct()
    )
    if not old:
        return
    if _has_review(old):
        newest.previous = older[0]
        newest.outcome = ReceivedFile.Outcome.LINKED
        newest.save(update_fields=["previous", "outcome"])
        return
    with transaction.atomic():
        old_ids = {s.pk for s in old}
        for session in old:
            # Sidechains go with their parent; a sidechain whose parent is not ours stays.
            if session.parent_id is None or session.parent_id not in old_ids:
                adapters.delete_session(session)
        newest.outcome = ReceivedFile.Outcome.REPLACED
        newest.save(update_fields=["outcome"])


def settle(record: ReceivedFile) -> None:
    """Once a queued import is over: take its sessions and settle its session key."""
    job = record.job
    if job is None or record.outcome != ReceivedFile.Outcome.PENDING:
        return
    job.refresh_from_db()
    if job.status == ImportJob.Status.DONE:
        record.outcome = ReceivedFile.Outcome.NEW
        record.save(update_fields=["outcome"])
        record.sessions.set(job.sessions())
        settle_key(record)
    elif job.status == ImportJob.Status.FAILED:
        record.outcome = ReceivedFile.Outcome.FAILED
        record.save(update_fields=["outcome"])


def settle_finished(team) -> None:
    """Settle every queued API import of the team whose job has finished since."""
    adapters.fail_stuck_jobs()
    pending = ReceivedFile.objects.filter(
        team=team, outcome=ReceivedFile.Outcome.PENDING,
        job__status__in=[ImportJob.Status.DONE, ImportJob.Status.FAILED],
    ).select_related("job")
    for record in pending:
        settle(record)
