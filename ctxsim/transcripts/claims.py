"""Idempotent uploads under concurrency (issue 27, issue 28 item 6): one import per (team, bytes).

`claimed(team, sha256)` holds the team's `UploadClaim` row for those bytes while the caller
checks what is stored and imports: the row's unique constraint lets only one request in, the
others wait until it is deleted and then find what the first one stored (its sessions, its
queued job) as any later repeat does. Both the upload page and `POST /api/v1/transcripts` go
through it. A claim older than the import timeout belongs to a process that died and is taken
over; a request that waits longer than `wait_seconds` gets `Busy` (the API answers 503 with
a Retry-After, the upload page a line asking to try again).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import IntegrityError, transaction
from django.utils import timezone

from ctxsim.transcripts.models import UploadClaim
from ctxsim.transcripts.tasks import import_timeout

POLL_SECONDS = 0.1
WAIT_SECONDS = 120.0


class Busy(Exception):
    """Another request has been importing the same bytes for longer than we wait."""


def _take(team, sha256: str) -> UploadClaim | None:
    try:
        with transaction.atomic():
            return UploadClaim.objects.create(team=team, sha256=sha256)
    except IntegrityError:
        return None


@contextmanager
def claimed(team, sha256: str, *, wait_seconds: float = WAIT_SECONDS) -> Iterator[None]:
    """Run the block as the only request of the team importing these bytes."""
    deadline = time.monotonic() + wait_seconds
    while (claim := _take(team, sha256)) is None:
        stale = timezone.now() - import_timeout()
        UploadClaim.objects.filter(team=team, sha256=sha256, created_at__lt=stale).delete()
        if time.monotonic() > deadline:
            raise Busy("the same file is being imported by another upload; try again shortly")
        time.sleep(POLL_SECONDS)
    try:
        yield
    finally:
        UploadClaim.objects.filter(pk=claim.pk).delete()
