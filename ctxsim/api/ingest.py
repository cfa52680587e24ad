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
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpRequest

from ctxsim.api import adapters
from ctxsim.api.models import ApiToken, ReceivedFile
from ctxsim.importers.errors import TranscriptError
from ctxsim.importers.redact import redact_text
from ctxsim.transcripts import claims
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
    outcome: str = ""  # what the answer says (`ReceivedFile.Outcome`)


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
                            record=record, outcome=ReceivedFile.Outcome.EXISTING)
    return None


def receive(
    request: HttpRequest, token: ApiToken, *, format: str = "", name: str = "",
    session_key: str = "", origin: dict[str, str] | None = None,
) -> Received:
    """Handle one POST; raises IngestError for what the API answers with 400, 413 or 503.

    The same bytes posted at once by several requests are imported once: each holds the
    team's claim on them in turn (`transcripts.claims`), so the later ones find the first
    one's sessions and answer 200 with them (`outcome: "existing"`)."""
    team = token.team
    settle_finished(team)  # earlier queued imports first, so a session key sees them
    spool, sha256, multipart_name, size = read_body(request)
    with spool:
        if size == 0:
            raise IngestError(400, "the file is empty")
        try:
            with claims.claimed(team, sha256):
                received = _repeat(team, sha256) or _receive_new(
                    spool, token, sha256=sha256, size=size, format=format,
                    name=name or multipart_name, session_key=session_key, origin=origin)
        except claims.Busy as busy:
            raise IngestError(503, str(busy)) from None
    if received.status == 201 and received.record is not None:
        _settle_answer(received)
    return received


def _receive_new(spool: IO[bytes], token: ApiToken, *, sha256: str, size: int, format: str,
                 name: str, session_key: str, origin: dict[str, str] | None) -> Received:
    """Import bytes the team does not have (or queue them), holding the claim on them."""
    team, user = token.team, token.created_by
    name = (name or f"api-upload-{sha256[:12]}")[:500]
    if team.redact_secrets:
        name = redact_text(name)[0]
    fields = {"team": team, "token": token, "sha256": sha256, "size": size, "name": name,
              "session_key": session_key}
    # Records of these bytes whose sessions are gone (deleted since) are not repeats any more.
    ReceivedFile.objects.filter(team=team, sha256=sha256).exclude(
        outcome=ReceivedFile.Outcome.PENDING).delete()
    if size > settings.CTXSIM_BACKGROUND_IMPORT_BYTES and not adapters.is_archive(spool):
        _check_format(format)
        upload = UploadedFile(file=spool, name=name, size=size)
        job = adapters.queue_import(upload, team=team, user=user, format=format,
                                    sha256=sha256, origin=origin)
        record = ReceivedFile.objects.create(**fields, job=job,
                                             outcome=ReceivedFile.Outcome.PENDING)
        return Received(status=202, job=job, record=record)
    made: list[ReceivedFile] = []

    def record_them(rows: list[Session]) -> None:
        # In the import's transaction: the sessions and their record appear together, so a
        # concurrent upload of the same key never sees the record without its sessions.
        record = ReceivedFile.objects.create(**fields)
        record.sessions.set(rows)
        made.append(record)

    try:
        outcome = adapters.import_now(spool, team=team, user=user, format=format, name=name,
                                      sha256=sha256, origin=origin,
                                      in_transaction=record_them)
    except TranscriptError as error:
        raise IngestError(400, str(error), error.details) from None
    except OSError as error:
        reason = error.strerror or error
        raise IngestError(400, f"the upload cannot be read ({reason})") from None
    return Received(status=201, sessions=list(outcome.sessions), format=outcome.format,
                    warnings=outcome.warnings, redactions=outcome.redactions, record=made[0])


def _settle_answer(received: Received) -> None:
    """Settle the new upload's session key; when a newer upload of the key won meanwhile
    (several at once), answer with the newest upload's sessions instead (200, superseded)."""
    record = received.record
    assert record is not None
    settle_key(record)
    record.refresh_from_db(fields=["outcome", "previous", "current"])
    received.outcome = record.outcome
    if not record.session_key or record.current:
        return
    newest = ReceivedFile.objects.filter(team_id=record.team_id, session_key=record.session_key,
                                         current=True).first()
    if newest is not None and newest.pk > record.pk and not _live_sessions(record):
        received.status = 200
        received.sessions = _live_sessions(newest)
        received.outcome = ReceivedFile.Outcome.SUPERSEDED


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

    The newest settled upload of a key (the highest id) wins, whichever finished importing
    last: a queued import that ends after a newer file was imported directly is the one
    replaced. One transaction with the key's rows locked (SQLite's immediate transactions
    serialize it), and the newest is marked `current`, which a unique constraint allows once
    per key: uploads settling at once cannot both keep their sessions.
    """
    if not record.session_key:
        return
    for attempt in range(3):
        try:
            with transaction.atomic():
                _settle_key_locked(record)
            return
        except IntegrityError:  # another upload of the key became current meanwhile
            if attempt == 2:
                raise


def _settle_key_locked(record: ReceivedFile) -> None:
    group = list(
        ReceivedFile.objects.select_for_update()
        .filter(team_id=record.team_id, session_key=record.session_key)
        .exclude(outcome__in=[ReceivedFile.Outcome.PENDING, ReceivedFile.Outcome.FAILED])
        .order_by("-pk")
    )
    if not group:
        return
    newest, older = group[0], group[1:]
    ReceivedFile.objects.filter(pk__in=[r.pk for r in older], current=True).update(current=False)
    if not newest.current:
        newest.current = True
        newest.save(update_fields=["current"])
    if not older:
        return
    keep = set(newest.sessions.values_list("pk", flat=True))
    old = list(
        Session.objects.filter(team_id=record.team_id, received_files__in=older)
        .exclude(pk__in=keep).distinct()
    )
    if not old:
        return
    if _has_review(old):
        newest.previous = older[0]
        newest.outcome = ReceivedFile.Outcome.LINKED
        newest.save(update_fields=["previous", "outcome"])
        return
    old_ids = {s.pk for s in old}
    # A subagent pushed from its own file hangs under the session it replaces: it moves to
    # the newest upload's session of the same key (or waits, unlinked, for it).
    successors = {s.source_key: s.pk for s in Session.objects.filter(pk__in=keep,
                                                                      parent__isnull=True)}
    for child in Session.objects.filter(parent_id__in=old_ids).exclude(pk__in=old_ids | keep):
        child.parent_id = successors.get(child.parent_key)
        child.save(update_fields=["parent"])
    for session in old:
        # Sidechains go with their parent; a sidechain whose parent is not ours stays.
        if session.parent_id is None or session.parent_id not in old_ids:
            adapters.delete_session(session)
    newest.outcome = ReceivedFile.Outcome.REPLACED
    newest.save(update_fields=["outcome"])


def settle(record: ReceivedFile) -> None:
    """Once a queued import is over: take its sessions and settle its session key."""
    if record.job is None or record.outcome != ReceivedFile.Outcome.PENDING:
        return
    with transaction.atomic():
        # Locked, so two requests settling the same record take its sessions once.
        locked = (ReceivedFile.objects.select_for_update(of=("self",)).select_related("job")
                  .get(pk=record.pk))
        job = locked.job
        done = job is not None and locked.outcome == ReceivedFile.Outcome.PENDING
        if done and job.status == ImportJob.Status.DONE:
            locked.outcome = ReceivedFile.Outcome.NEW
            locked.save(update_fields=["outcome"])
            locked.sessions.set(job.sessions())
        elif done and job.status == ImportJob.Status.FAILED:
            locked.outcome = ReceivedFile.Outcome.FAILED
            locked.save(update_fields=["outcome"])
    record.refresh_from_db(fields=["outcome"])
    if record.job is not None:
        record.job.refresh_from_db()
    if record.outcome == ReceivedFile.Outcome.NEW:
        settle_key(record)


def settle_finished(team) -> None:
    """Settle every queued API import of the team whose job has finished since."""
    adapters.fail_stuck_jobs()
    pending = ReceivedFile.objects.filter(
        team=team, outcome=ReceivedFile.Outcome.PENDING,
        job__status__in=[ImportJob.Status.DONE, ImportJob.Status.FAILED],
    ).select_related("job")
    for record in pending:
        settle(record)
