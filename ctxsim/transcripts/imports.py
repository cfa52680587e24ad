"""Importing a transcript file into a team: parse (pure importers), then store in one transaction.

A file that fails to parse or to store leaves no rows behind; its error is one line that says
what was wrong and where.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.conf import settings

from ctxsim import importers
from ctxsim.importers.errors import TranscriptError
from ctxsim.reviews.services import record_uploads
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import save_sessions


@dataclass
class ImportOutcome:
    sessions: list[Session] = field(default_factory=list)
    format: str = ""
    warnings: list[str] = field(default_factory=list)


def import_transcript(
    source: str | Path | IO[bytes],
    *,
    team,
    user=None,
    format: str | None = None,
    source_name: str = "",
    before_save: Callable[[], None] | None = None,
) -> ImportOutcome:
    """Parse `source` and store every session it yields; raises TranscriptError on bad input.

    `before_save` is called between parsing and the write transaction (a background job uses
    it to say it is saving).
    """
    parsed = importers.load(
        source, format=format or None, max_bytes=settings.CTXSIM_MAX_UPLOAD_BYTES
    )
    if not parsed.sessions:
        raise TranscriptError("the file holds no conversation to import")
    if before_save is not None:
        before_save()
    name = source_name or (Path(source).name if isinstance(source, (str, Path)) else "")
    rows = save_sessions(parsed.sessions, team=team, user=user, source_name=name)
    record_uploads(rows, user, name)  # activity list; never fails the import (reviews app)
    return ImportOutcome(sessions=rows, format=parsed.format, warnings=list(parsed.warnings))


def session_line(row: Session) -> dict:
    """The JSON object `import_transcript` prints per session (SPEC §6)."""
    return {
        "session": row.pk,
        "title": row.title,
        "format": row.format,
        "messages": row.message_count,
        "tool_calls": row.tool_call_count,
        "tool_results": row.tool_result_count,
    }
