"""A team's sessions as the list, the overview and the API pick them: filters, pages, totals."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from django.core.paginator import Page, Paginator
from django.db.models import Prefetch, Q, QuerySet

from ctxsim.teams.models import Team
from ctxsim.transcripts import search
from ctxsim.transcripts.models import Session

SESSIONS_PER_PAGE = 50




@dataclass(frozen=True)
class SessionFilters:
    format: str = ""
    status: str = ""
    query: str = ""
    contents: bool = False  # the query also searches inside contents and tool-call arguments
    uploader: str = ""  # a username
    since: date | None = None  # uploaded on or after this day
    until: date | None = None  # uploaded on or before this day
    project: str = ""  # the origin's cwd, whole or its last folder name
    host: str = ""  # the origin's host name


def team_formats(team: Team) -> list[str]:
    """The formats the team's sessions have, for the filter's choices."""
    return list(
        Session.objects.filter(team=team).order_by("format").values_list("format", flat=True)
        .distinct()
    )


def list_sessions(team: Team, filters: SessionFilters, page: str | int | None) -> Page:
    """One page of the team's top-level sessions, each with its sidechains prefetched as a
    list (`sidechain_rows`: prefetched into each session's manager, Django cloned the query
    for every session, a thirtieth of a loaded web worker's CPU).

    Sidechains are listed under their parent, so filters and search pick the parent when the
    parent or one of its sidechains matches.
    """
    sidechains = Session.objects.select_related("uploaded_by").order_by("created_at", "pk")
    rows = (
        filter_sessions(team, filters)
        .select_related("uploaded_by")
        .prefetch_related(Prefetch("sidechains", queryset=sidechains, to_attr="sidechain_rows"))
    )
    return Paginator(rows.order_by("-created_at", "-pk"), SESSIONS_PER_PAGE).get_page(page)


def filter_sessions(team: Team, filters: SessionFilters) -> QuerySet[Session]:
    """The team's top-level sessions the filters pick (the list's rows, and the overview's):
    a parent matches when it or one of its sidechains does."""
    rows = Session.objects.filter(team=team, parent__isnull=True)
    if filters.uploader:
        rows = rows.filter(uploaded_by__username=filters.uploader)
    if filters.since is not None:
        rows = rows.filter(created_at__date__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(created_at__date__lte=filters.until)
    if filters.host:
        rows = rows.filter(origin_host=filters.host)
    if filters.project:
        project = filters.project.rstrip("/") or "/"
        rows = rows.filter(Q(origin_cwd=project) | Q(origin_cwd__endswith=f"/{project}"))
    if filters.format:
        rows = rows.filter(Q(format=filters.format) | Q(sidechains__format=filters.format))
    if filters.status:
        rows = rows.filter(review_status=filters.status)
    if filters.query:
        match = (Q(title__icontains=filters.query) | Q(sidechains__title__icontains=filters.query)
                 | Q(source_name__icontains=filters.query))
        if filters.contents:
            try:
                holding = search.matching_session_ids(team, filters.query)
            except search.SearchError:  # nothing a contents search can look up: titles only
                holding = []
            match |= Q(pk__in=holding) | Q(sidechains__pk__in=holding)
        rows = rows.filter(match)
    if filters.format or filters.query:
        rows = rows.distinct()
    return rows


def session_totals(sessions: Iterable[Session]) -> dict[str, int]:
    rows = list(sessions)
    return {
        "sessions": len(rows),
        "tool_calls": sum(r.tool_call_count for r in rows),
        "tool_results": sum(r.tool_result_count for r in rows),
    }
