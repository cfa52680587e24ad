"""Importing a transcript file into a team: parse (pure importers), then store in one transaction.

A file that fails to parse or to store leaves no rows behind; its error is one line that says
what was wrong and where. What other apps do with new sessions (activity lines, list figures)
hangs off the signals in `transcripts.signals`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from django.conf import settings

from ctxsim import importers
from ctxsim.importers.errors import TranscriptError
from ctxsim.importers.redact import merge_counts, redact_sessions, redact_text
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.signals import import_finished, sessions_imported
from ctxsim.transcripts.store import save_sessions


@dataclass
class ImportOutcome:
    sessions: list[Session] = field(default_factory=list)
    format: str = ""
    warnings: list[str] = field(default_factory=list)
    # Secrets replaced in this file, {kind: count} (SPEC §12); empty when none or redaction off.
    redactions: dict[str, int] = field(default_factory=dict)


def import_transcript(
    source: str | Path | IO[bytes],
    *,
    team,
    user=None,
    format: str | None = None,
    source_name: str = "",
    before_save: Callable[[], None] | None = None,
    source_sha256: str = "",
    redact: bool | None = None,
    redactions: Mapping[str, int] | None = None,
    in_transaction: Callable[[list[Session]], None] | None = None,
    origin: Mapping[str, str] | None = None,
) -> ImportOutcome:
    """Parse `source` and store every session it yields; raises TranscriptError on bad input.

    `before_save` is called between parsing and the write transaction (a background job uses
    it to say it is saving); `in_transaction` with the new rows inside it, before the commit
    (a background job links them to itself there; raising rolls the import back);
    `source_sha256` (of the file's bytes) is kept with the sessions, so an upload of the same
    bytes is recognised. Secrets are redacted from the parsed sessions before they are saved
    when `redact` is true (default: the team's "redact secrets on import"); `redactions` are
    counts already replaced in the raw file (a stored background upload), added to the
    session's total. `origin` (host, cwd, agent, agent_version) is what the upload said of
    where it came from; what it leaves out is taken from the transcript.
    """
    parsed = importers.load(
        source, format=format or None, max_bytes=settings.CTXSIM_MAX_UPLOAD_BYTES
    )
    if not parsed.sessions:
        raise TranscriptError("the file holds no conversation to import")
    if redact is None:
        redact = getattr(team, "redact_secrets", True)
    sessions, warnings = parsed.sessions, list(parsed.warnings)
    found: dict[str, int] = {}
    if redact:
        sessions, counts = redact_sessions(sessions)
        warnings = [redact_text(line)[0] for line in warnings]  # they quote the file
        found = merge_counts(redactions, counts)
        if found:
            sessions = [replace(s, meta={**s.meta, "redactions": found}) for s in sessions]
    if before_save is not None:
        before_save()
    name = source_name or (Path(source).name if isinstance(source, (str, Path)) else "")
    if redact:
        name = redact_text(name)[0]
        origin = {k: redact_text(v)[0] for k, v in (origin or {}).items() if isinstance(v, str)}
    rows = save_sessions(sessions, team=team, user=user, source_name=name,
                         in_transaction=in_transaction, source_sha256=source_sha256,
                         origin=origin)
    # The rows are committed; receivers (the reviews app's activity list) never fail the import.
    sessions_imported.send(sender=Session, sessions=rows, user=user, source_name=name)
    return ImportOutcome(
        sessions=rows, format=parsed.format, warnings=warnings, redactions=found
    )


def finish_import(rows: Iterable[Session]) -> None:
    """Announce that an upload, job or command is done importing `rows`, after the import's
    transaction: the replays app fills each session's list figures from the default replay."""
    import_finished.send(sender=Session, sessions=list(rows))


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
