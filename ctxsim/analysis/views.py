"""Cache & information loss, and parameter sweeps, for one session (issue 10).

Views parse the request, call `services`, and render the page or its htmx partial. Every object
comes through `get_scoped`: outsiders get 404, and starting a sweep needs the write role.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from ctxsim.analysis import services, tasks
from ctxsim.analysis.models import Sweep
from ctxsim.htmx import render_page_or_partial
from ctxsim.insights.prices import PRICES_TAKEN
from ctxsim.jobs import poll
from ctxsim.teams.access import get_scoped
from ctxsim.transcripts.models import Session


def _session(request: HttpRequest, session_id: int, action: str = "read"):
    return get_scoped(Session.objects.select_related("team"), request.user, action, pk=session_id)


@require_safe
def insights_page(request: HttpRequest, session_id: int) -> HttpResponse:
    """Hit rate, cost, breaks, break-even and information lost, one column per profile; the
    columns the task worker is computing show as such, and the section polls until done."""
    session, _ = _session(request, session_id)
    cache, errors = services.cache_choice(request.GET)
    view = services.insights_view(session, request.GET, cache.rule(), user=request.user)
    columns, problems = view.columns, view.errors
    refs, _ = services.profile_refs(request.GET)
    recorded = services.recorded_view(session, columns, cache.rule()) if not view.pending \
        else None
    context = {
        "pending": view.pending,
        "computing": view.computing,
        "progress": view.progress,
        "poll": poll.watch(job for _, job in view.progress.pending),
        "session": session,
        "cache": cache,
        "rule": cache.rule(),
        "models": services.model_options(),
        "profiles": services.profile_options(session.team),
        "chosen": refs,
        "columns": columns,
        "recorded": recorded,
        "errors": {**errors, **problems},
        "url": reverse("session-insights", args=[session.pk]),
        "prices_taken": PRICES_TAKEN,
        "state_fields": services.state_fields(request.GET),
        "state_query": urlencode(services.state_fields(request.GET)),
    }
    return render_page_or_partial(request, "analysis/insights.html", {"insights": "insights"},
                                  context)


@require_safe
def sweep_page(request: HttpRequest, session_id: int) -> HttpResponse:
    """The sweep form (around the session page's settings) and this session's sweeps."""
    session, membership = _session(request, session_id)
    form, errors = services.sweep_form(session, request.GET)
    return render(request, "analysis/sweeps.html", _sweep_context(session, membership, form,
                                                                  errors))


def _sweep_context(session, membership, form, errors) -> dict:
    return {
        "session": session, "membership": membership, "form": form, "errors": errors,
        "models": services.model_options(), "profiles": services.profile_options(session.team),
        "sweeps": session.sweeps.all()[:20], "lifetimes": services.all_lifetimes(),
        "state_fields": parse_qsl(form.settings.query()), "state_query": form.settings.query(),
    }


@require_POST
def sweep_create(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = _session(request, session_id, "write")
    form, errors = services.sweep_form(session, request.POST)
    axes, axis_errors = services.parse_axes(form, request.POST)
    errors.update(axis_errors)
    if errors:
        context = _sweep_context(session, membership, form, errors)
        return render(request, "analysis/sweeps.html", context, status=400)
    sweep = services.create_sweep(session, request.user, form, axes)
    return redirect("sweep-detail", session_id=session.pk, sweep_id=sweep.pk)


@require_safe
def sweep_detail(request: HttpRequest, session_id: int, sweep_id: int) -> HttpResponse:
    """A sweep's progress (polled while it runs), then its chart, front and apply links."""
    sweep, membership = get_scoped(Sweep.objects.select_related("session__team"), request.user,
                                   team_field="session__team", pk=sweep_id,
                                   session_id=session_id)
    if tasks.fail_stuck_sweeps(among=[sweep]):  # its worker went away: say so, stop polling
        sweep.refresh_from_db()
    points = services.sweep_points(sweep.session, sweep) if sweep.status == "done" else []
    context = {"session": sweep.session, "sweep": sweep, "points": points,
               "chart": services.chart_data(points), "membership": membership,
               "changes_nothing": services.changes_nothing(points)}
    return render_page_or_partial(request, "analysis/sweep.html",
                                  {"sweep-status": "sweep-status"}, context)


@require_POST
def sweep_cancel(request: HttpRequest, session_id: int, sweep_id: int) -> HttpResponse:
    """Stop a queued or running sweep (whoever may start one); the worker stops at its next
    point and the page says who cancelled it."""
    sweep, _ = get_scoped(Sweep.objects.select_related("session__team"), request.user, "write",
                          team_field="session__team", pk=sweep_id, session_id=session_id)
    tasks.cancel_sweep(sweep, request.user)
    return redirect("sweep-detail", session_id, sweep.pk)
