"""How the reviews app follows the transcripts app (connected in `ReviewsConfig.ready`)."""

from __future__ import annotations

from ctxsim.reviews.services import record_uploads


def on_sessions_imported(sender, *, sessions, user=None, source_name: str = "", **kwargs) -> None:
    """An "upload" activity line for each new session (never fails the import)."""
    record_uploads(sessions, user, source_name)
