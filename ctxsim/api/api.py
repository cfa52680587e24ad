"""The versioned REST API, `/api/v1/` (SPEC §12), built on django-ninja.

Every route authenticates with `Authorization: Bearer <token>`: a missing, bad or revoked
token is 401, a token without the route's scope 403, an object of another team 404 (the same
answer as for a missing one). The schema is at `/api/v1/openapi.json`, the docs page at
`/api/v1/docs` (Swagger UI from django-ninja's own static files: it works offline).
"""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest, QueryDict
from django.urls import reverse
from django.views.decorators.http import require_safe
from ninja import Field, NinjaAPI, Query, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer

from ctxsim.api import adapters, ingest, tokens
from ctxsim.api.models import ApiToken, ReceivedFile, Scope
from ctxsim.api.params import (
    MAX_ID,
    PROFILE_PATTERN,
    FormatFilter,
    IsoDate,
    Lifetime,
    ModelName,
    ProfileRef,
    StatusFilter,
    Text,
    problem,
)
from ctxsim.api.schemas import (
    Error,
    IngestOut,
    JobOut,
    OverviewOut,
    QueuedOut,
    Refused,
    SessionDetail,
    SessionPage,
)
from ctxsim.transcripts.models import ImportJob, Session


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        return tokens.authenticate(token)


api = NinjaAPI(
    title="ctxsim API",
    version="1",
    description=(
        "Upload agent transcripts and read sessions, traces and import jobs. Authenticate "
        "with `Authorization: Bearer <token>`; team owners create tokens on the team page."
    ),
    auth=TokenAuth(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError):
    # One line, like every other bad-input answer of ctxsim (ninja's default is 422 + a list).
    detail = problem(exc.errors[0]) if exc.errors else "invalid request"
    return api.create_response(request, {"detail": detail}, status=400)


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError):
    response = api.create_response(
        request, {"detail": "a valid API token is needed (Authorization: Bearer <token>)"},
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="ctxsim"'
    return response


def _text(value: str, name: str, limit: int = 500) -> str:
    """A query parameter as text the database accepts: PostgreSQL refuses NUL characters."""
    if "\x00" in value:
        raise HttpError(400, f"{name}: contains a NUL character")
    return value.strip()[:limit]


def _only(request: HttpRequest, schema: type[Schema] | None = None) -> None:
    """An unknown query parameter is a 400 naming it (never silently ignored)."""
    known = set(schema.model_fields) if schema is not None else set()
    for name in request.GET:
        if name not in known:
            raise HttpError(400, f"{name or '(empty name)'}: not a parameter of this request")


def _token(request: HttpRequest, *scopes: str) -> ApiToken:
    """The request's token, refused with 403 unless it has one of `scopes`."""
    token: ApiToken = request.auth  # type: ignore[attr-defined]
    if not any(token.allows(scope) for scope in scopes):
        raise HttpError(403, f"this token lacks the {' or '.join(scopes)} scope")
    return token


def _session(token: ApiToken, session_id: int) -> Session:
    if not 0 < session_id <= MAX_ID:
        raise HttpError(404, "no such session")
    session = Session.objects.filter(team_id=token.team_id, pk=session_id).first()
    if session is None:
        raise HttpError(404, "no such session")
    return session


def session_out(request: HttpRequest, session: Session) -> dict:
    sidechains = getattr(session, "sidechain_rows", None)  # prefetched by the list
    if sidechains is None:
        sidechains = session.sidechains.all()
    return {
        "id": session.pk,
        "url": request.build_absolute_uri(reverse("session-detail", args=[session.pk])),
        "title": session.title,
        "format": session.format,
        "messages": session.message_count,
        "tool_calls": session.tool_call_count,
        "tool_results": session.tool_result_count,
        "warnings": list(session.warnings or []),
        "parent": session.parent_id,
        "sidechains": [s.pk for s in sidechains],
        "created_at": session.created_at,
        "review_status": session.review_status,
        "redactions": dict((session.meta or {}).get("redactions") or {}),
        "origin": session.origin,
    }


def job_ref(request: HttpRequest, job: ImportJob) -> dict:
    return {"id": job.pk, "url": request.build_absolute_uri(reverse("api:job", args=[job.pk]))}


# -- ingest ------------------------------------------------------------------------------------

_BODY = {
    "requestBody": {
        "required": True,
        "description": "The transcript file (any supported format), as the raw body "
                       "(`Content-Encoding: gzip` accepted) or as the multipart field `file`.",
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        },
    }
}


class IngestQuery(Schema):
    format: FormatFilter = ""
    name: Text = ""
    session_key: Text = ""
    # Where the file comes from (stored on its sessions; what is left out is taken from the
    # transcript: Claude Code's and Codex's `cwd` and version).
    host: Text = ""
    cwd: Text = ""
    agent: Text = ""
    agent_version: Text = ""


@api.post(
    "/transcripts",
    url_name="transcripts",
    response={200: IngestOut, 201: IngestOut, 202: QueuedOut, 400: Refused, 401: Error,
              403: Error, 413: Error, 503: Error},
    openapi_extra=_BODY,
    summary="Upload a transcript",
)
def post_transcript(request: HttpRequest, params: Query[IngestQuery]):
    """Import a transcript. Same bytes again (also several at once): 200 with the sessions
    stored the first time, `outcome: "existing"`. Above the background-import size: 202 with
    the job to follow. A new file with the same `session_key` replaces the earlier sessions
    unless they have comments or a status; of uploads of one key arriving at once the newest
    wins, and the others answer 200 with its sessions (`outcome: "superseded"`). `host`,
    `cwd`, `agent`, `agent_version`: where the file comes from (its sessions' `origin`)."""
    token = _token(request, Scope.INGEST)
    _only(request, IngestQuery)
    origin = {name: _text(getattr(params, name), name, 1000)
              for name in ("host", "cwd", "agent", "agent_version")}
    try:
        received = ingest.receive(
            request, token, format=_text(params.format, "format", 40),
            name=_text(params.name, "name"),
            session_key=_text(params.session_key, "session_key", 200),
            origin={k: v for k, v in origin.items() if v},
        )
    except ingest.IngestError as error:
        response = api.create_response(
            request, {"detail": error.message, "details": list(error.details)},
            status=error.status)
        if error.status == 503:
            response["Retry-After"] = "5"
        return response
    if received.status == 202:
        return Status(202, {"job": job_ref(request, received.job)})
    record = received.record
    return Status(received.status, {
        "sessions": [session_out(request, s) for s in received.sessions],
        "format": received.format,
        "warnings": received.warnings,
        "redactions": received.redactions,
        "outcome": received.outcome or (record.outcome if record is not None else ""),
    })


# -- reading -----------------------------------------------------------------------------------


class ListQuery(Schema):
    format: FormatFilter = ""
    status: StatusFilter = ""
    q: Text = ""
    project: Text = ""
    host: Text = ""
    page: int = Field(1, ge=1)


@api.get("/sessions", url_name="sessions",
         response={200: SessionPage, 400: Error, 401: Error, 403: Error, 404: Error},
         summary="List sessions")
def list_sessions(request: HttpRequest, filters: Query[ListQuery]):
    """The team's top-level sessions, newest first, filtered and searched as on the list page
    (50 a page; sidechains are listed under their parent). `project`: the origin's `cwd`,
    whole or its last folder name; `host`: the origin's host. An unknown `format` or
    `status` is a 400, a page past the last one a 404."""
    token = _token(request, Scope.READ)
    _only(request, ListQuery)
    ingest.settle_finished(token.team)
    chosen = adapters.SessionFilters(
        format=filters.format, status=filters.status,
        query=_text(filters.q, "q", 200),
        project=_text(filters.project, "project", 1000),
        host=_text(filters.host, "host", 255),
    )
    page = adapters.list_sessions(token.team, chosen, min(filters.page, MAX_ID))
    if page.number != filters.page:
        raise HttpError(404, f"page {filters.page} is past the last page "
                             f"({page.paginator.num_pages})")
    base = request.build_absolute_uri(reverse("api:sessions"))

    def link(number: int) -> str:
        query = request.GET.copy()
        query["page"] = str(number)
        return f"{base}?{query.urlencode()}"

    return {
        "count": page.paginator.count,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "next": link(page.next_page_number()) if page.has_next() else None,
        "previous": link(page.previous_page_number()) if page.has_previous() else None,
        "results": [session_out(request, s) for s in page.object_list],
    }


@api.get("/sessions/{session_id}", url_name="session",
         response={200: SessionDetail, 400: Error, 401: Error, 403: Error, 404: Error},
         summary="One session")
def get_session(request: HttpRequest, session_id: int):
    """Counts, the default profile's peak and total tokens, recorded usage, calibration, and
    `origin` (host, cwd, agent, agent_version)."""
    token = _token(request, Scope.READ)
    _only(request)
    ingest.settle_finished(token.team)
    session = _session(token, session_id)
    totals = adapters.default_totals(session)
    meta = session.meta or {}
    keys = (
        ReceivedFile.objects.filter(team_id=token.team_id, sessions=session)
        .exclude(session_key="").values_list("session_key", flat=True).distinct()
    )
    return {
        **session_out(request, session),
        "source_name": session.source_name,
        "model_calls": session.model_call_count,
        "error_results": session.error_result_count,
        "total_bytes": session.total_bytes,
        "started_at": session.started_at,
        "ended_at": session.ended_at,
        "session_keys": list(keys),
        "tokens": {
            "peak_raw": totals.get("peak_raw"),
            "peak_sent": totals.get("peak_sent"),
            "total_raw": totals.get("total_raw"),
            "total_sent": totals.get("total_sent"),
            "calls": totals.get("calls"),
            "failed_calls": totals.get("failed"),
        },
        "recorded_usage": meta.get("recorded_usage", meta.get("usage")),
        "calibration": meta.get("calibration"),
    }


class TraceQuery(Schema):
    profile: Annotated[str, Field(pattern=f"^$|{PROFILE_PATTERN}")] = ""
    summary: Text = ""


def _check_saved(team, refs: list[str]) -> None:
    """A `saved:<id>` the team does not have is a 404 (the schema cannot know it)."""
    for ref in refs:
        if ref.startswith("saved:") and not adapters.saved_profile_exists(team, ref):
            raise HttpError(404, f"profile: no saved profile {ref!r} in this team")


@api.get(
    "/sessions/{session_id}/trace",
    url_name="session-trace",
    response={200: dict, 400: Error, 401: Error, 403: Error, 404: Error},
    summary="The session's trace (SPEC §6)",
)
def get_trace(request: HttpRequest, session_id: int, params: Query[TraceQuery]):
    """The trace `simulate` prints, streamed. Query: `profile` (a preset or `saved:<id>`;
    default: the session's own agent's, `claude-code`, `codex`, `openhands`, else `chatcli`),
    `summary=1`, and any threshold of the session page by its parameter name (e.g.
    `profile=chatcli&contextMaximumSize=20000`); an unknown query parameter is a 400."""
    token = _token(request, Scope.READ)
    session = _session(token, session_id)
    for name, value in request.GET.items():
        _text(value, name)
    _check_saved(token.team, [params.profile])
    unknown = [name for name in request.GET if not adapters.is_trace_parameter(name)]
    if unknown:
        return Status(400, {"detail": f"{unknown[0]}: not a parameter of the trace (see "
                                      "the session page's thresholds for their names)"})
    settings, errors = adapters.replay_settings(request.GET, session)
    if errors:
        return Status(400, {"detail": "; ".join(f"{k}: {v}" for k, v in errors.items())})
    summary = request.GET.get("summary") in ("1", "true", "on")
    return adapters.trace_response(session, settings, summary=summary)


class OverviewQuery(Schema):
    q: Text = ""
    contents: bool = False
    format: FormatFilter = ""
    status: StatusFilter = ""
    uploader: Text = ""
    project: Text = ""
    host: Text = ""
    since: IsoDate = None
    until: IsoDate = None
    profiles: list[ProfileRef] = Field([], max_length=4)
    model: ModelName = ""
    lifetime: Lifetime = ""
    price: float | None = Field(None, ge=0, le=1000)


@api.get("/overview", url_name="overview",
         response={200: OverviewOut, 400: Error, 401: Error, 403: Error, 404: Error},
         summary="The team overview")
def get_overview(request: HttpRequest, params: Query[OverviewQuery]):
    """The overview page's numbers, with its filters (`q`, `contents`, `format`, `status`,
    `uploader`, `project`, `host`, `since`, `until`), up to four `profiles` (repeated;
    built-in or `saved:<id>`) and cache rule (`model`, `lifetime`, `price`). Asking queues
    whatever is not stored yet on the task worker: ask again until `complete`."""
    token = _token(request, Scope.READ)
    _only(request, OverviewQuery)
    _check_saved(token.team, params.profiles)
    if params.uploader and not adapters.is_member(token.team, params.uploader):
        raise HttpError(404, f"uploader: no member {params.uploader!r} in this team")
    query = QueryDict(mutable=True)
    for name, value in params.dict().items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item in (None, "", False):
                continue
            query.appendlist(name, "on" if item is True else _text(str(item), name, 200))
    figures, errors = adapters.overview(token.team, query)
    if errors:
        return Status(400, {"detail": "; ".join(f"{k}: {v}" for k, v in errors.items())})
    return figures


@api.get("/jobs/{job_id}", url_name="job",
         response={200: JobOut, 400: Error, 401: Error, 403: Error, 404: Error},
         summary="A background import")
def get_job(request: HttpRequest, job_id: int):
    """Progress of a queued import (202 answer); when done, its sessions. Either scope."""
    token = _token(request, Scope.INGEST, Scope.READ)
    _only(request)
    if not 0 < job_id <= MAX_ID:
        raise HttpError(404, "no such job")
    adapters.fail_stuck_jobs()
    job = ImportJob.objects.filter(team_id=token.team_id, pk=job_id).first()
    if job is None:
        raise HttpError(404, "no such job")
    record = ReceivedFile.objects.filter(job=job).first()
    if record is not None:
        ingest.settle(record)
    sessions = list(job.sessions()) if job.status == ImportJob.Status.DONE else []
    return {
        **job_ref(request, job),
        "status": job.status,
        "progress": job.progress,
        "message": job.message_line,
        "details": job.message_details,
        "file_name": job.file_name,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "sessions": [session_out(request, s) for s in sessions],
    }


def urls():
    """The API's URL patterns, open to the login middleware (the token is the login)."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        if pattern.name in ("openapi-json", "openapi-view"):
            pattern.callback = require_safe(pattern.callback)  # ninja answers any method
        pattern.callback.login_required = False
    return patterns, app_name, namespace
