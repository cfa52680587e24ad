"""Background imports: the worker's side of a job (Django's `django.tasks`, run by
`manage.py db_worker`).

`services` queues jobs and imports this module; nothing here imports `services`. A job's
progress and heartbeat are written outside the import's transaction, so the page can watch it,
and a worker that dies leaves a "running" job whose heartbeat stops (`fail_stuck_jobs`).

What a job says is true (issue 20 item 11): its sessions are linked to it inside the import's
own transaction, which commits only while the job is still this attempt's running job; a
thread beats the heartbeat through every phase (a long parse reports no progress); final
status writes apply only to the running attempt; and each job the worker starts first settles
jobs a dead worker left "running".
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import IO

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.tasks import task
from django.utils import timezone

from ctxsim.heartbeat import Heartbeat
from ctxsim.importers.errors import TranscriptError
from ctxsim.jobs import lifecycle
from ctxsim.transcripts.imports import finish_import, import_transcript
from ctxsim.transcripts.models import ImportJob

logger = logging.getLogger(__name__)

# Share of the progress bar given to reading the file; saving and replay stats take the rest.
READ_SHARE = 90

# The phases of a background import, in order, as its job row names them while it runs (its
# `message`); each begins with `JobReporter.enter`, and a worker killed in any of them leaves a
# job that recovery settles truthfully (`fail_stuck_jobs`; the kill tests stop a real worker
# at each phase of this list: tests/web/test_import_jobs.py).
READING = "reading the file"  # parsing: nothing written yet
SAVING = "saving the sessions"  # the write transaction, sessions linked to the job inside it
STATS = "computing token peaks"  # committed: the list figures of the new sessions
CLEANUP = "removing the upload"  # figures stored; the upload goes, then the job says done
PHASES = (READING, SAVING, STATS, CLEANUP)
PHASE_PERCENT = {READING: 0, SAVING: READ_SHARE, STATS: 97, CLEANUP: 99}
DEFAULT_IMPORT_TIMEOUT_SECONDS = 600


class JobGivenUp(Exception):
    """The job stopped being this attempt's running job while it imported (marked stuck, or
    re-queued): the import's transaction is rolled back, the job row keeps its word."""


@task(queue_name="imports")
def run_import(job_id: int, attempt: int | None = None) -> dict:
    """Import one stored upload; the job row records progress and the outcome."""
    return run_import_job(job_id, attempt)


class ProgressStream:
    """A binary stream that reports how far into the file the importer has read.

    It forwards what the importers' `Source` uses (read, readline, iteration, seek, tell) and
    reports how much of the file has been read contiguously from its start: the importer
    rewinds after probing the head, and an offset reached by seeking (the size probe seeks
    to the end) is not progress (it once showed 90 % after a second; issue 20 item 11).
    """

    def __init__(self, raw: IO[bytes], size: int, report: Callable[[int], None]):
        self._raw = raw
        self._size = max(size, 1)
        self._report = report
        self._offset = 0
        self._furthest = 0

    def _advance(self, data: bytes) -> bytes:
        start = self._offset
        self._offset += len(data)
        # Only a read that starts inside what was already read extends it.
        if data and start <= self._furthest < self._offset:
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

    def enter(self, phase: str) -> None:
        """The job enters one of PHASES: its row says so at once."""
        self.update(PHASE_PERCENT[phase], phase, force=True)

    def reading(self, percent_of_file: int) -> None:
        self.update(percent_of_file * READ_SHARE // 100)

    def update(self, percent: int, message: str | None = None, *, force: bool = False) -> None:
        now = time.monotonic()
        elapsed = now - self.last_write
        moved = percent - self.last_percent
        due = (moved >= self.MIN_STEP) or (moved > 0 and elapsed >= self.MIN_INTERVAL)
        if not (force or due or elapsed >= self.HEARTBEAT_EVERY):
            return
        fields = {"done": max(percent, self.last_percent, 0), "heartbeat_at": timezone.now()}
        if message is not None:
            fields["message"] = message
        ImportJob.objects.filter(pk=self.job_id, status=ImportJob.Status.RUNNING).update(**fields)
        self.last_percent = fields["done"]
        self.last_write = now


def run_import_job(job_id: int, attempt: int | None = None) -> dict:
    """The worker's side of a background import: claim the job, import, record the outcome."""
    fail_stuck_jobs()  # a worker that died left its jobs "running": settle them first
    now = timezone.now()
    claim = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.QUEUED)
    if attempt is not None:
        claim = claim.filter(attempts=attempt)
    if not claim.update(status=ImportJob.Status.RUNNING, started_at=now, heartbeat_at=now):
        return {"job": job_id, "status": "skipped"}
    job = ImportJob.objects.select_related("team", "user").get(pk=job_id)
    reporter = JobReporter(job)
    if job.session_ids:  # stored by an earlier attempt whose worker died: finish that one
        return _complete(job, reporter)
    reporter.enter(READING)
    beat = _ours(job).update
    # Well within the timeout, however short it is set (a test sets a few seconds).
    every = min(JobReporter.HEARTBEAT_EVERY, import_timeout().total_seconds() / 4)
    with Heartbeat(lambda: beat(heartbeat_at=timezone.now()), every,
                   f"import-{job.pk}-heartbeat"):
        return _import(job, reporter)


def _import(job: ImportJob, reporter: JobReporter) -> dict:
    job_id = job.pk

    def link_sessions(rows) -> None:
        # Inside the import's transaction: the sessions and the job's word about them commit
        # together, and only while the job is still ours.
        linked = _ours(job).update(session_ids=[row.pk for row in rows],
                                   heartbeat_at=timezone.now())
        if not linked:
            raise JobGivenUp

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
                source_sha256=job.sha256,
                redactions=job.redactions,  # replaced before the upload was stored
                in_transaction=link_sessions,
                origin=job.origin or None,
            )
    except JobGivenUp:
        logger.warning("background import %s was given up while it ran; nothing stored", job_id)
        return {"job": job_id, "status": "given up"}
    except TranscriptError as error:
        return _finish(job, ImportJob.Status.FAILED, error.with_details())
    except OSError as error:
        return _finish(
            job, ImportJob.Status.FAILED, f"the stored upload cannot be read ({error})"
        )
    except Exception as error:  # the job must say it failed, whatever went wrong
        logger.exception("background import %s failed", job_id)
        return _finish(
            job, ImportJob.Status.FAILED, f"the import failed unexpectedly ({type(error).__name__})"
        )
    reporter.enter(STATS)
    finish_import(outcome.sessions)
    ids = [row.pk for row in outcome.sessions]
    message = "; ".join(outcome.warnings)
    # The sessions are stored; the upload is no longer needed. Deleted before the job says
    # done: a worker killed in between leaves a running job with its sessions linked, which
    # recovery settles as done, never a done job whose upload nothing deletes.
    reporter.enter(CLEANUP)
    discard_uploads([job.pk])
    return _finish(job, ImportJob.Status.DONE, message, session_ids=ids)


def _complete(job: ImportJob, reporter: JobReporter) -> dict:
    """The phases after the commit, for sessions an earlier attempt stored."""
    rows = list(job.sessions())
    reporter.enter(STATS)
    finish_import(rows)
    reporter.enter(CLEANUP)
    discard_uploads([job.pk])
    return _finish(job, ImportJob.Status.DONE,
                   "the sessions were stored by an earlier attempt, whose worker stopped; "
                   "this one computed their list figures", session_ids=[r.pk for r in rows])


class _SavingHint:
    """Called by `import_transcript` once parsing is over, before the write transaction."""

    def __init__(self, reporter: JobReporter):
        self.reporter = reporter

    def __call__(self) -> None:
        self.reporter.enter(SAVING)


def _ours(job: ImportJob):
    """The job's row while it is still this attempt's running job."""
    return ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.RUNNING,
                                    attempts=job.attempts)


def import_timeout() -> timedelta:
    seconds = getattr(settings, "CTXSIM_IMPORT_TIMEOUT_SECONDS", DEFAULT_IMPORT_TIMEOUT_SECONDS)
    return timedelta(seconds=seconds)


def fail_stuck_jobs(now=None, *, among: Iterable[ImportJob] | None = None) -> int:
    """Settle jobs "running" without a heartbeat for longer than their timeout (their worker
    died), of every kind (`ctxsim.jobs.lifecycle.settle`): queued again once, keeping the
    upload — the next attempt imports the file, or only finishes the phases after the commit
    when the sessions were stored (they are linked inside the import's transaction); after
    that an import is done when its sessions were stored, else failed (`last_word`). Returns
    how many were settled.

    Without `among` every team's jobs are checked (`check_stuck_imports`, and each job the
    worker starts). Pages pass the jobs they are about to show, already read: their check
    costs no query, and a write happens only when one of those jobs really is stuck (a write
    on SQLite would wait for an import's write transaction).
    """
    return lifecycle.settle(now, among=among)


def last_word(job, why: str) -> bool:
    """An import lost after its retries: done when its sessions were stored, else failed; its
    upload is deleted either way."""
    job = ImportJob.objects.get(pk=job.pk)
    span = lifecycle.span(import_timeout())
    if job.session_ids:
        settled = lifecycle.ours(job).update(
            status=ImportJob.Status.DONE, done=100, finished_at=timezone.now(),
            message=(f"the sessions were stored, then the worker stopped (no progress for over "
                     f"{span}); their list figures are computed when they are opened"))
    else:
        settled = lifecycle.ours(job).update(
            status=ImportJob.Status.FAILED, finished_at=timezone.now(),
            message=(f"the import stopped without finishing (no progress for over {span}; was "
                     "the worker stopped?), also after being queued again; nothing was stored, "
                     "upload the file again"))
    discard_uploads([job.pk])
    return bool(settled)


def enqueue(job: ImportJob) -> None:
    """Hand the job to the task backend once the job row is committed (the worker reads it)."""
    def send() -> None:
        result = run_import.enqueue(job.pk, job.attempts)
        ImportJob.objects.filter(pk=job.pk).update(task_id=str(result.id)[:64])

    transaction.on_commit(send)


def discard_uploads(job_ids: Iterable[int]) -> None:
    """Delete the stored uploads of these jobs (settled: nothing will read them again)."""
    for pk, name in ImportJob.objects.filter(pk__in=list(job_ids)).exclude(
            stored_name="").values_list("pk", "stored_name"):
        with contextlib.suppress(Exception):  # a storage error must not undo the settling
            default_storage.delete(name)
        ImportJob.objects.filter(pk=pk, stored_name=name).update(stored_name="")


def _finish(job: ImportJob, status: str, message: str, *, session_ids=()) -> dict:
    # Only the running attempt writes its end: a job given up (or re-queued) meanwhile keeps
    # what the page already told the user. A failure here is the file's own (it cannot be
    # read, or the importer refused it): running it again gives the same answer, so its
    # upload is deleted with it.
    finished = _ours(job).update(
        status=status,
        done=100 if status == ImportJob.Status.DONE else job.done,
        message=message,
        session_ids=list(session_ids),
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    if finished and status == ImportJob.Status.FAILED:
        discard_uploads([job.pk])
    return {"job": job.pk, "status": status, "sessions": list(session_ids)}
