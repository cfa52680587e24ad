"""The few functions of the other apps the API calls, in one place.

The API only sees these names, so when a service of the transcripts or replays app moves
(job bodies went to `transcripts.tasks`, replay settings to `replays.state`), the change is
here and nowhere else in the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from django.core.files.storage import default_storage
from django.http import FileResponse, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import reverse

from ctxsim.importers import FORMATS as _FORMATS
from ctxsim.insights.prices import LIFETIMES, MODELS
from ctxsim.pipeline.params import PARAMS, env_var_of
from ctxsim.pipeline.profiles import PROFILES
from ctxsim.replays import services as replays
from ctxsim.replays import traces
from ctxsim.replays.state import settings_from_query
from ctxsim.transcripts import services as transcripts
from ctxsim.transcripts.imports import ImportOutcome, finish_import, import_transcript
from ctxsim.transcripts.models import ReviewStatus, Session
from ctxsim.transcripts.redaction import is_archive  # noqa: F401  (re-exported)

SessionFilters = transcripts.SessionFilters
FORMATS = list(_FORMATS)
STATUSES = [value for value, _ in ReviewStatus.choices]
PROFILE_NAMES = list(PROFILES)
CACHE_MODELS = list(MODELS)
CACHE_LIFETIMES = sorted({name for names in LIFETIMES.values() for name in names})


def saved_profile_exists(team, ref: str) -> bool:
    from ctxsim.replays.models import SavedProfile

    number = ref.removeprefix("saved:")
    return number.isdigit() and SavedProfile.objects.filter(team=team, pk=int(number)).exists()


def is_member(team, username: str) -> bool:
    return team.memberships.filter(user__username=username).exists()
list_sessions = transcripts.list_sessions
queue_import = transcripts.queue_import
delete_session = transcripts.delete_session
fail_stuck_jobs = transcripts.fail_stuck_jobs

TRACE_CHUNK = 64 * 1024


def import_now(stream, *, team, user, format: str, name: str, sha256: str = "",
               origin: Mapping[str, str] | None = None,
               in_transaction: Callable[[list[Session]], None] | None = None) -> ImportOutcome:
    """Import a file during the request (raises TranscriptError), then announce it is done
    (the replays app fills the list figures). `in_transaction(rows)` runs before the commit."""
    outcome = import_transcript(stream, team=team, user=user, format=format or None,
                                source_name=name, source_sha256=sha256, origin=origin,
                                in_transaction=in_transaction)
    finish_import(outcome.sessions)
    return outcome


def replay_settings(query: Mapping[str, Any], session: Session):
    """(settings, errors) from the session page's query parameters; without `profile`, the
    session's own agent's (as the page)."""
    return settings_from_query(query, session.team, replays.default_settings(session).profile_ref,
                               session=session)


# What the trace reads besides the parameters themselves (and their `.type`/`.value` halves).
TRACE_FIELDS = {"profile", "summary", "stages", "stages.form"}
STAGE_FIELD_PREFIXES = ("stage.", "phase.", "order.")


def is_trace_parameter(name: str) -> bool:
    """Whether a query parameter means something to the trace (the session page's state)."""
    base = name.removesuffix(".type").removesuffix(".value")
    return (name in TRACE_FIELDS or base in PARAMS or env_var_of(name) is not None
            or name.startswith(STAGE_FIELD_PREFIXES))


def default_totals(session: Session) -> dict[str, Any]:
    """The default profile's session figures (peak and total tokens, calls, failures)."""
    run = replays.summary_for(session, replays.default_settings(session))
    return dict(run.totals)


def overview(team, query: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The team overview's numbers (queuing what is not stored yet), or the query's problems."""
    from ctxsim.overview import services as overview_services

    choice = overview_services.parse_choice(team, query)
    if choice.errors:
        return None, choice.errors
    built = overview_services.build_overview(team, choice, api=True)
    return {**overview_services.overview_json(built), "filters": choice.filter_query,
            "cache": choice.cache.as_dict()}, {}


def trace_response(session: Session, settings, *, summary: bool) -> HttpResponse:
    """The trace as the API answers it (`ctxsim.replays.traces`): 413 past
    CTXSIM_TRACE_MAX_BYTES (with the estimate and the summary's URL), 507 without the temp
    space, and for a session longer than CTXSIM_INLINE_REPLAY_CALLS the worker's file — 202
    with its status and a Retry-After until it is written. Else streamed as written."""
    summary_url = (reverse("api:session-trace", args=[session.pk]) + "?"
                   + settings.query() + "&summary=1")
    try:
        estimate = traces.check_bounds(session, settings, summary,
                                       may_replay=traces.inline(session))
    except traces.TraceTooLarge as exc:
        return JsonResponse({"detail": traces.too_large_message(exc),
                             "estimate_bytes": exc.estimate, "limit_bytes": exc.limit,
                             "summary_url": summary_url}, status=413)
    except traces.NoTempSpace as exc:
        return JsonResponse({"detail": traces.no_space_message(exc), "needed_bytes": exc.needed,
                             "free_bytes": exc.free}, status=507)
    if traces.inline(session):
        return StreamingHttpResponse(trace_chunks(session, settings, summary=summary),
                                     content_type="application/json")
    row = traces.trace_file_for(session, settings, summary, api=True)
    if row.status == row.Status.DONE:
        return FileResponse(default_storage.open(row.stored_name, "rb"),
                            content_type="application/json")
    response = JsonResponse({
        **traces.progress_of(row), "estimate_bytes": estimate,
        "detail": (row.message if row.status == row.Status.FAILED else
                   "the worker is writing this trace (the session is longer than "
                   "CTXSIM_INLINE_REPLAY_CALLS); ask again for the file")},
        status=traces.waiting_status(row))
    response["Retry-After"] = "2"
    return response


def trace_chunks(session: Session, settings, *, summary: bool) -> Iterator[str | bytes]:
    """The SPEC §6 trace of the session in pieces, for a streamed response; nothing is
    computed until the response is read.

    When the replays app writes traces to a file (`trace_file`, so a long session's trace is
    never held in memory whole), the pieces are read from it; else from `trace_json`.
    """
    make_file = getattr(replays, "trace_file", None)
    if make_file is not None:
        with make_file(session, settings, summary=summary) as handle:
            while chunk := handle.read(TRACE_CHUNK):
                yield chunk
        return
    body = replays.trace_json(session, settings, summary=summary)
    for start in range(0, len(body), TRACE_CHUNK):
        yield body[start : start + TRACE_CHUNK]
