"""The few functions of the other apps the API calls, in one place.

The transcripts and replays services are being reorganised (job bodies into tasks, replay
settings and caches into their own modules); the API only sees these names, so a move there
is a change here and nowhere else in the API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ctxsim.replays import services as replays
from ctxsim.transcripts import services as transcripts
from ctxsim.transcripts.imports import ImportOutcome, import_transcript
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.redaction import is_archive  # noqa: F401  (re-exported)

SessionFilters = transcripts.SessionFilters
list_sessions = transcripts.list_sessions
queue_import = transcripts.queue_import
delete_session = transcripts.delete_session
fail_stuck_jobs = transcripts.fail_stuck_jobs
fill_default_stats = transcripts.fill_default_stats

TRACE_CHUNK = 64 * 1024


def import_now(stream, *, team, user, format: str, name: str) -> ImportOutcome:
    """Import a file during the request (raises TranscriptError), then fill the list figures."""
    outcome = import_transcript(stream, team=team, user=user, format=format or None,
                                source_name=name)
    fill_default_stats(outcome.sessions)
    return outcome


def replay_settings(query: Mapping[str, Any], team):
    """(settings, errors) from the session page's query parameters."""
    return replays.settings_from_query(query, team)


def default_totals(session: Session) -> dict[str, Any]:
    """The default profile's session figures (peak and total tokens, calls, failures)."""
    run = replays.summary_for(session, replays.ReplaySettings())
    return dict(run.totals)


def trace_chunks(session: Session, settings, *, summary: bool) -> Iterator[str]:
    """The SPEC §6 trace of the session in pieces, for a streamed response."""
    body = replays.trace_json(session, settings, summary=summary)
    for start in range(0, len(body), TRACE_CHUNK):
        yield body[start : start + TRACE_CHUNK]
