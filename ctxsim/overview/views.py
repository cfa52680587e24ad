"""The team overview and corpus sweeps (SPEC §13). Parse → service → render.

The overview and the corpus sweep form work in the user's current team (an outsider sees their
own team's); a stored sweep is fetched through `get_scoped` (outsiders get 404), and starting,
cancelling or applying one needs the write role.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from ctxsim.analysis.choices import all_lifetimes, model_options
from ctxsim.htmx import render_page_or_partial
from ctxsim.jobs import poll
from ctxsim.jobs.models import PENDING
from ctxsim.overview import services
from ctxsim.overview.models import ColumnTask, CorpusSweep
from ctxsim.replays.profiles import ProfileError, profile_choices
from ctxsim.teams.access import get_scoped
from ctxsim.teams.current import current_membership_for


def _choice_context(team, choice) -> dict:
    return {"choice": choice, "form": choice.form, "errors": choice.errors, "team": team,
            "profiles": profile_choices(team), "models": model_options(),
            "lifetimes": all_lifetimes(), "max_profiles": services.MAX_PROFILES}


@require_safe
def team_overview(request: HttpRequest) -> HttpResponse:
    """The team's sessions under up to four profiles; polls while the worker fills it in."""
    membership = current_membership_for(request)
    choice = services.parse_choice(membership.team, request.GET)
    overview = services.build_overview(membership.team, choice, request.user)
    context = {**_choice_context(membership.team, choice), "overview": overview,
               "membership": membership, "query": request.GET.urlencode(),
               "poll": _columns_poll(membership.team, overview),
               "again_url": request.get_full_path()}
    return render_page_or_partial(request, "overview/overview.html",
                                  {"overview-results": "overview-results"}, context)


def _columns_poll(team, overview) -> poll.Group | None:
    """The pending jobs of the overview's columns (`ColumnTask`), polled as one
    (`ctxsim.jobs.poll`)."""
    if overview.complete:
        return None
    keys = {column.key for column in overview.columns}
    pending = ColumnTask.objects.filter(team=team, status__in=PENDING,
                                        key__in={key for key, _ in keys}).order_by("pk")
    return poll.watch(job for job in pending if (job.key, job.rule) in keys)


def _sweep_poll(sweep: CorpusSweep) -> poll.Group | None:
    """The pending job of a running corpus sweep: its last part, the one the quota counts (the
    page reloads itself after it while other parts still run)."""
    if not sweep.is_active:
        return None
    return poll.watch(sweep.parts.filter(counted=True, status__in=PENDING))


@require_safe
def corpus_sweeps(request: HttpRequest) -> HttpResponse:
    """The corpus sweep form (the overview's filters, a profile, a grid) and the team's sweeps."""
    membership = current_membership_for(request)
    form = services.corpus_form(membership.team, request.GET)
    return render(request, "overview/corpus_sweeps.html",
                  _corpus_context(membership, form, form.choice.errors))


def _corpus_context(membership, form, errors) -> dict:
    team = membership.team
    fields = [(k, v) for k in (*services.FILTER_FIELDS, *services.CACHE_FIELDS)
              if (v := form.choice.form.data.get(k))]
    return {**_choice_context(team, form.choice), "corpus": form, "errors": errors,
            "filter_fields": fields,
            "membership": membership, "sweeps": CorpusSweep.objects.filter(team=team)[:20]}


@require_POST
def corpus_sweep_create(request: HttpRequest) -> HttpResponse:
    membership = current_membership_for(request, "write")
    form = services.corpus_form(membership.team, request.POST)
    axes, axis_errors = services.parse_axes(form, request.POST)
    errors = {**form.choice.errors, **axis_errors}
    if errors:
        return render(request, "overview/corpus_sweeps.html",
                      _corpus_context(membership, form, errors), status=400)
    sweep = services.create_corpus_sweep(membership.team, request.user, form, axes)
    return redirect("corpus-sweep-detail", corpus_sweep_id=sweep.pk)


def _sweep(request: HttpRequest, corpus_sweep_id: int, action: str = "read"):
    return get_scoped(CorpusSweep.objects.select_related("team"), request.user, action,
                      pk=corpus_sweep_id)


@require_safe
def corpus_sweep_detail(request: HttpRequest, corpus_sweep_id: int) -> HttpResponse:
    """Progress (polled while it runs), then the summed points, their front and apply forms."""
    sweep, membership = _sweep(request, corpus_sweep_id)
    context = _sweep_context(request, sweep, membership)
    return render_page_or_partial(request, "overview/corpus_sweep.html",
                                  {"corpus-status": "corpus-status"}, context)


def _sweep_context(request: HttpRequest, sweep: CorpusSweep, membership) -> dict:
    points = services.corpus_points(sweep) if sweep.status == "done" else []
    progress = services.corpus_progress(sweep)  # first: parts left running are queued again
    return {"sweep": sweep, "points": points, "chart": services.corpus_chart(points),
            "changes_nothing": services.corpus_changes_nothing(points),
            "progress": progress, "membership": membership, "poll": _sweep_poll(sweep),
            "again_url": reverse("corpus-sweep-detail", args=[sweep.pk])}


@require_POST
def corpus_sweep_cancel(request: HttpRequest, corpus_sweep_id: int) -> HttpResponse:
    sweep, _ = _sweep(request, corpus_sweep_id, "write")
    if services.cancel_corpus_sweep(sweep):
        messages.success(request, "The sweep is cancelled.")
    else:
        messages.error(request, "The sweep is over already.")
    return redirect("corpus-sweep-detail", corpus_sweep_id=sweep.pk)


@require_POST
def corpus_sweep_apply(request: HttpRequest, corpus_sweep_id: int) -> HttpResponse:
    """Save one point as a team profile, then open the overview with it."""
    sweep, membership = _sweep(request, corpus_sweep_id, "write")
    point = request.POST.get("point", "")
    try:
        if not point.isascii() or not point.isdigit():
            raise ProfileError({"point": "choose a point of the sweep"})
        saved = services.apply_point(sweep, request.user, int(point),
                                     request.POST.get("name", ""),
                                     request.POST.get("description", ""))
    except ProfileError as exc:
        context = {**_sweep_context(request, sweep, membership),
                   "apply_errors": exc.errors, "apply_point": point}
        return render(request, "overview/corpus_sweep.html", context, status=400)
    messages.success(request, f"Saved “{saved.name}” as a team profile.")
    return redirect(services.overview_link(sweep, saved))
