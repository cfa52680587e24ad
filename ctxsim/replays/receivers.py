"""How the replays app follows the transcripts app (connected in `ReplaysConfig.ready`).

- a finished import gets its list figures from the default profile's replay;
- a deleted session takes its spill files along, once the deletion is committed (storage is
  not transactional) and only those no other session's replay still points to (files are
  shared by hash).
"""

from __future__ import annotations

import logging

from django.core.files.storage import default_storage
from django.db import transaction

from ctxsim.replays.models import SpilledFile, storage_name_for

logger = logging.getLogger(__name__)


def on_import_finished(sender, *, sessions, **kwargs) -> None:
    """Replay each new session with the default profile; a failing replay never fails the
    import (the list then shows "—")."""
    from ctxsim.replays.services import compute_default_stats

    for row in sessions:
        try:
            compute_default_stats(row)
        except Exception:
            logger.exception("computing the default replay stats of session %s failed", row.pk)


def on_session_deleting(sender, *, sessions, **kwargs) -> None:
    """Remember the spill files of the sessions about to go; remove the orphans after commit."""
    hashes = set(
        SpilledFile.objects.filter(run__session__in=sessions).values_list("sha256", flat=True)
    )
    if not hashes:
        return

    def remove_orphans() -> None:
        still_used = set(
            SpilledFile.objects.filter(sha256__in=hashes).values_list("sha256", flat=True)
        )
        for sha in hashes - still_used:
            default_storage.delete(storage_name_for(sha))

    transaction.on_commit(remove_orphans)
