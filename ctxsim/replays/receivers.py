"""How the replays app follows the transcripts app (connected in `ReplaysConfig.ready`).

- a finished import gets its list figures from the default profile's replay (and a long
  session the call its page opens on, `deep_calls.keep_default_call`);
- a deleted session takes its spill files along, once the deletion is committed (storage is
  not transactional) and only those no other session's replay still points to (files are
  shared by hash).
"""

from __future__ import annotations

import logging

from ctxsim.replays.models import SpillContent

logger = logging.getLogger(__name__)


def on_import_finished(sender, *, sessions, **kwargs) -> None:
    """Replay each new session with the default profile; a failing replay never fails the
    import (the list then shows "—")."""
    from ctxsim.replays import deep_calls
    from ctxsim.replays.services import compute_default_stats, default_settings, stored_summary
    from ctxsim.transcripts.models import Session

    for row in sessions:
        try:
            compute_default_stats(row)
            # A long session's page opens on the call this replay kept (issue 28 item 4).
            settings = default_settings(row)
            if (run := stored_summary(row, settings)) is not None:
                deep_calls.keep_default_call(row, settings, run)
        except Exception:
            if not Session.objects.filter(pk=row.pk).exists():
                continue  # replaced by a newer upload of its session key meanwhile: nothing lost
            logger.exception("computing the default replay stats of session %s failed", row.pk)


def on_session_deleting(sender, *, sessions, **kwargs) -> None:
    """Remember the spill contents of the sessions about to go; remove the orphans after
    commit (`spills.remove_orphans_on_commit`)."""
    from ctxsim.replays.spills import remove_orphans_on_commit

    hashes = set(
        SpillContent.objects.filter(session__in=sessions).values_list("sha256", flat=True)
    )
    if hashes:
        remove_orphans_on_commit(hashes)
