"""The session page and what hangs off it (SPEC §8): replay, call view, spills, trace, profiles
(a fold's rows and a message's body: `ctxsim.replays.call_parts`).

Views parse the request, call `services`/`page`, and render the page or one of its partials
(`ctxsim.htmx.render_page_or_partial`); HX response headers come from `django_htmx.http`.
Every object comes through the team-scoped access helpers.
"""

from __future__ import annotations

import functools
import json
from urllib.parse import parse_qsl, urlencode

from django.contrib import messages
from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
)
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import (
    HttpResponseClientRedirect,
    HttpResponseClientRefresh,
    push_url,
    reswap,
    retarget,
)

from ctxsim.htmx import partial_for, render_page_or_partial, target_id
from ctxsim.pipeline.params import ascii_index
from ctxsim.pipeline.profiles import default_profile_for
from ctxsim.pipeline.spill import TooManySpills
from ctxsim.replays import (
    background,
    beside,
    call_view,
    comparison,
    deep_calls,
    page,
    profiles,
    run_figures,
    services,
    spills,
    traces,
)
from ctxsim.replays.message_list import join_rows
from ctxsim.replays.models import ReplayRun, SavedProfile
from ctxsim.replays.pending import (
    CALL_PENDING_REGION,
    PENDING_REGION,
    ReplayPending,
    call_pending,
    pending_page,
)
from ctxsim.replays.state import settings_from_query
from ctxsim.reviews import services as reviews
from ctxsim.teams.access import get_scoped
from ctxsim.teams.current import request_memberships
from ctxsim.transcripts.models import Session

TEMPLATE = "replays/session.html"
REVIEW_TEMPLATE = "reviews/review.html"
# The regions of the session page an htmx request may reload, by DOM id.
PAGE_PARTIALS = {"call-view": "call-response", "replay": "replay-response"}
COMPARE_PARTIALS = {"compare-calls": "compare-calls"}


def scoped_session(request: HttpRequest, session_id: int, action: str = "read"):
    return get_scoped(Session.objects.select_related("team"), request.user, action,
                      memberships=request_memberships(request), pk=session_id)


# The same URL is a whole page or a fragment by these headers: a browser that cached the
# fragment (htmx pushed its URL) must not show it for Back/Forward.
@vary_on_headers("HX-Request", "HX-Target")
@require_safe
def session_page(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = scoped_session(request, session_id)
    settings, errors = settings_from_query(request.GET, session.team,
                                           default_profile_for(session.format),
                                           session=session)
    url = f"{reverse('session-detail', args=[session.pk])}?"
    if errors and request.htmx:
        # Keep the last good result on screen: only the error list is swapped.
        response = render(request, f"{TEMPLATE}#form-errors", {"errors": errors})
        return reswap(retarget(response, "#form-errors"), "outerHTML")
    try:
        run, call = run_and_call(request, session, settings)
    except ReplayPending as pending:
        return pending_page(request, session, settings, pending.row, PAGE_PARTIALS)
    except TooManySpills as exc:  # thresholds that make a replay unbounded: say what to change
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    if target_id(request) == PENDING_REGION:
        return HttpResponseClientRefresh()  # stored now: the pending page reloads as the page
    numbers = run_figures.numbers_choice(request.GET.get("numbers"))
    numbers_q = "&numbers=raw" if numbers == "raw" else ""
    if not errors and not request.htmx and _needs_redirect(request, settings, call):
        view = call_view.CallFilter.from_query(request.GET)  # view state: kept as given
        landing = call_view.Landing.from_query(request.GET)
        return redirect(url + settings.query(call) + numbers_q + view.query_suffix()
                        + landing.query_suffix())
    try:  # a deep call of a long session is the worker's (issue 28 item 4)
        context = page_context(request, session, membership, settings, errors, run, call,
                               numbers)
    except deep_calls.CallPending as pending:
        return call_pending(request, session, settings, pending.row, PAGE_PARTIALS)
    if target_id(request) == CALL_PENDING_REGION:
        return HttpResponseClientRefresh()  # made now: the pending page reloads as the page
    context["url"] = url
    response = render_page_or_partial(request, TEMPLATE, PAGE_PARTIALS, context)
    if partial_for(request, PAGE_PARTIALS):
        push_url(response, url + settings.query(call) + numbers_q + context["view_query"])
    return response


def run_and_call(request: HttpRequest, session, settings):
    """The replay summary for these settings and the call the query asks for (on a miss the
    replay keeps that call, which the request shows next). A long session's replay that is
    not stored is handed to the worker: ReplayPending."""
    requested = request.GET.get("call", "")
    pending = background.pending_for(session, settings, request.user,
                                     poll=target_id(request) == PENDING_REGION)
    if pending is not None:
        raise ReplayPending(pending)
    run = services.summary_for(session, settings, ascii_index(requested), user=request.user)
    call = page.selected_call(run, requested)
    # A search hit on the message that answers this call lands where that message is sent.
    at = call_view.Landing.from_query(request.GET).at
    if at is not None and call + 1 < len(run.calls) and run.calls[call].get("resp") == at:
        call += 1
    return run, call


def _needs_redirect(request: HttpRequest, settings, call: int) -> bool:
    """A submitted form (no JavaScript) lands on the canonical, shareable URL."""
    # `numbers` (how figures are shown) and the call view's filter are view state beside the
    # replay's, not what is replayed: they are kept as given.
    given = sorted((k, v) for k, v in parse_qsl(request.GET.urlencode(), keep_blank_values=True)
                   if k != "numbers" and k not in call_view.CallFilter.FIELDS
                   and k not in call_view.Landing.FIELDS)
    canonical = settings.query(call if "call" in request.GET else None)
    return bool(given) and given != sorted(parse_qsl(canonical, keep_blank_values=True))


# Stands for a message's position in the comment link rendered once per call view.
_ORIGIN = "__origin__"


def comment_boxes(request, session, call: int, rows, review) -> dict[int, str]:
    """Each commentable message's comment box (threads and, for writers, the form), rendered
    only for rows that need one; the message list itself is rendered in Python."""
    state = review["review"]
    boxes = {}
    form_url = f"{reverse('comment-create', args=[session.pk])}?call={call}&message="
    # A call may hold thousands of uncommented messages: their link differs only by the
    # message's position, so the partial is rendered once and the position filled in.
    toggle = render_to_string(f"{REVIEW_TEMPLATE}#comment-toggle",
                              {"url": form_url + _ORIGIN}, request) if state.can_write else ""
    for index, origin, _html in rows:
        count = state.message_counts.get(origin, 0) if origin is not None else 0
        if origin is None or not (count or state.can_write):
            continue
        if not count:
            boxes[index] = toggle.replace(_ORIGIN, str(origin))
            continue
        anchor = {**review, "session": session, "threads": state.message_threads.get(origin, []),
                  "call": call, "message": origin, "count": count}
        boxes[index] = render_to_string(f"{REVIEW_TEMPLATE}#message-comments", anchor, request)
    return boxes


def page_context(request, session, membership, settings, errors, run, call,
                 numbers: str = "calibrated") -> dict:
    pack = deep_calls.call_pack(session, settings, run, call, request.user)
    previous, following = page.neighbours(run, call)
    review = reviews.page_context(session, membership, call)
    view = call_view.CallFilter.from_query(request.GET)
    landing = call_view.Landing.from_query(request.GET)

    def render(positions, reach=None):
        return deep_calls.rows_html(session, settings, run, call, positions, request.user, reach)

    found = None
    if view.active:  # exactly the rows the filter keeps, folded or not
        if view.q:
            found = deep_calls.search_rows(session, settings, run, call, view.q, request.user)
        shown, folds = call_view.filtered_rows(pack, view, found, render), []
    else:  # a commented message is always shown, even where its call folds it away, and so
        # is the message a search hit lands on
        keep = {*review["review"].message_counts, *([landing.at] if landing.at is not None else [])}
        shown, folds = call_view.unfold(pack, keep, render)
    shown = call_view.reaching_rows(shown, *call_view.reach_targets(pack, view, landing, found),
                                    render)
    # The words to highlight, as JSON in an attribute (the template escapes it; the script
    # reads it as text and marks text nodes only).
    words = call_view.highlighted(view, landing)
    highlight = json.dumps(words) if words else ""
    messages_html = join_rows(
        shown, comment_boxes(request, session, call, shown, review), folds=folds,
        fold_link={"session_id": session.pk, "call_index": call, "query": settings.query()},
    )
    # What only the whole page or the replay section shows is built when the template reads
    # it (once): a call step's partial, the most frequent request, never does.
    lazy = functools.cache
    return {
        **review,
        "session": session,
        "membership": membership,
        "settings": settings,
        "query": settings.query(),
        "call_query": settings.query(call),
        "state_fields": lazy(settings.fields),
        "override_fields": lazy(lambda: settings.fields(overrides_only=True)),
        "errors": errors,
        "fields": lazy(lambda: page.form_fields(settings, errors)),
        "stage_rows": lazy(lambda: page.stage_rows(settings)),
        "phases": lazy(page.phase_names),
        "profiles": lazy(lambda: profiles.profile_choices(session.team)),
        "run": run,
        "summary": lazy(lambda: run_figures.summary(run, numbers)),
        # Built when the template reads it (once): a call step's partial never does, and at
        # 16,000 calls the chart's points were a seventh of a step (issue 31).
        "chart": functools.cache(lambda: run_figures.chart_data(
            run, call, review["review"].chart_counts,
            (session.meta or {}).get("recorded_compactions"), numbers)),
        **run_figures.compactions_context(run, (session.meta or {}).get("recorded_compactions"),
                                          call, numbers),
        # What the cache & information-loss page stored for these settings, on the link to it
        # (read once, when the link is rendered: a call step's partial never is).
        "insights_stored": functools.cache(lambda: beside.stored("insights", session, settings)),
        "numbers": numbers,
        "numbers_q": "&numbers=raw" if numbers == "raw" else "",
        "usage": page.call_usage(run, call),
        "call": pack,
        "call_summary": run.calls[call] if run.calls else None,
        "call_index": call,
        "previous": previous,
        "next": following,
        "messages_html": messages_html,
        "view": view,
        "view_query": view.query_suffix(),
        "landing": landing,
        "highlight": highlight,
        "shown": len(shown),
        "total_rows": len(pack.statuses),
        "first_of": (first := pack.first_of({index for index, _o, _h in shown})),
        "badges": [{"status": status, "n": n, "first": first.get(status)}
                   for status, n in pack.counts.items() if n],
        "call_tools": pack.tools(),
        "roles": ("system", "user", "assistant", "tool"),
        "jump_statuses": ("rewritten", "spilled"),
        "counts": pack.counts,
        "reports": pack.reports,
        "facts": lazy(lambda: page.session_facts(session)),
    }


@require_safe
def trace_download(request: HttpRequest, session_id: int) -> HttpResponse:
    """The trace of SPEC §6 for this session and the page's settings, as a JSON download."""
    session, _ = scoped_session(request, session_id)
    settings, errors = settings_from_query(request.GET, session.team,
                                           default_profile_for(session.format),
                                           session=session)
    if errors:
        return HttpResponseBadRequest("; ".join(f"{k}: {v}" for k, v in errors.items()),
                                      content_type="text/plain")
    # The summary (no history arrays) unless the full trace is asked for: the full one of a
    # long session is hundreds of MB (issue 20 item 2). Either is streamed from a file.
    summary = request.GET.get("summary") not in ("0", "false", "off")
    # Bounded before anything is replayed; a long session's trace is written by the worker
    # (issue 28 item 2): a 413, 507 or 202 instead of the file.
    body, answer = traces.download(request, session, settings, summary)
    if answer is not None:
        return answer
    response = FileResponse(body, content_type="application/json")
    _attachment(response, f"ctxsim-session-{session.pk}-{settings.profile.name}.json")
    return response


def _attachment(response: HttpResponse, name: str) -> None:
    """Mark `response` as a download named `name`, reduced to ASCII letters, digits and
    `._-`: names come from users (a saved profile's name with a quote added a second
    filename, a newline gave a 500; issue 20 item 18)."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in name)
    response["Content-Disposition"] = f'attachment; filename="{safe}"'


def _spill(request: HttpRequest, session_id: int, run: str, seq: int):
    """The spill `seq` of the session's run `run` (its key), and the run (404 for outsiders)."""
    stored, _ = get_scoped(
        ReplayRun.objects.select_related("session").defer("calls", "totals"),
        request.user, team_field="session__team", key=run, session_id=session_id,
    )
    return spills.spill_at(stored, seq), stored


@require_safe
def spill_view(request: HttpRequest, session_id: int, run: str, seq: int) -> HttpResponse:
    """A spilled file with line numbers and an optional line range, like an agent's ranged
    read (`?start=&end=`, 1-based, inclusive)."""
    spill, stored = _spill(request, session_id, run, seq)
    data = spills.spill_bytes(spill)
    view = spills.spill_lines(data, request.GET.get("start"), request.GET.get("end"))
    return render(request, "replays/spill.html",
                  {"spill": spill, "session": stored.session, **view})


@require_safe
def spill_download(request: HttpRequest, session_id: int, run: str, seq: int) -> HttpResponse:
    spill, _ = _spill(request, session_id, run, seq)
    response = HttpResponse(spills.spill_bytes(spill), content_type="text/plain; charset=utf-8")
    _attachment(response, spill.name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


@vary_on_headers("HX-Request", "HX-Target")
@require_safe
def compare(request: HttpRequest, session_id: int) -> HttpResponse:
    """Two profiles on one session: chart overlay, savings per stage, one call side by side."""
    session, _ = scoped_session(request, session_id)
    chosen = comparison.compare_settings(session, request.GET)
    keys = [settings.key for _side, settings, _bad in chosen]
    # A long session's replays go to the worker, both sides at once.
    waiting = [(settings, row) for _side, settings, _bad in chosen if (row := (
        background.pending_for(session, settings, request.user, together=keys,
                               poll=target_id(request) == PENDING_REGION))) is not None]
    if waiting:
        return pending_page(request, session, *waiting[0], COMPARE_PARTIALS)
    if target_id(request) == PENDING_REGION:
        return HttpResponseClientRefresh()  # stored now: the pending page reloads as the page
    sides, errors = comparison.compare_sides(session, request.GET, user=request.user,
                                             chosen=chosen)
    call = page.selected_call(sides[0].run, request.GET.get("call"))
    kept = sides[0].settings.fields()  # side A's state travels with every link and the form
    columns = [comparison.compare_column(session, side, call, request.user) for side in sides]
    context = {
        "session": session,
        "sides": sides,
        "columns": columns,
        "errors": errors,
        "call_index": call,
        "calls": len(sides[0].run.calls),
        "profiles": profiles.profile_choices(session.team),
        "chart": comparison.compare_chart(sides, call),
        "url": reverse("session-compare", args=[session.pk]),
        "state_fields": kept,
        "state_query": urlencode([*kept, ("b", sides[1].ref)]),
        "back_query": sides[0].settings.query(call),
    }
    return render_page_or_partial(request, "replays/compare.html", COMPARE_PARTIALS, context)


@require_safe
def profile_export(request: HttpRequest, session_id: int) -> HttpResponse:
    """The current settings as each real tool's own configuration (one artefact per tool)."""
    session, _ = scoped_session(request, session_id)
    settings, errors = settings_from_query(request.GET, session.team,
                                           default_profile_for(session.format),
                                           session=session)
    exports = profiles.exports_for(settings)
    wanted = request.GET.get("download")
    for export in exports:
        if export.tool == wanted:
            response = HttpResponse(export.content, content_type="text/plain; charset=utf-8")
            _attachment(response, export.filename)
            return response
    return render(request, "replays/export.html", {
        "session": session, "settings": settings, "errors": errors, "exports": exports,
        "export_rows": [(e, profiles.export_defaults(settings, e)) for e in exports],
        "query": settings.query(),
    })


@require_POST
def profile_save(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = scoped_session(request, session_id, "write")
    settings, errors = settings_from_query(request.POST, session.team, session=session)
    try:
        saved = profiles.save_profile(session, request.user, settings,
                                      request.POST.get("name", ""),
                                      request.POST.get("description", ""), errors)
    except profiles.ProfileError as exc:
        return _profile_form_error(request, session, "save", exc.errors)
    return _to_page(request, session, urlencode({"profile": saved.ref}))


@require_POST
def profile_import(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = scoped_session(request, session_id, "write")
    tool, text = request.POST.get("format", ""), request.POST.get("text", "")
    try:
        saved = profiles.import_profile(session, request.user, tool, text,
                                        request.POST.get("name", ""),
                                        request.POST.get("description", ""))
    except profiles.ProfileError as exc:
        return _profile_form_error(request, session, "import", exc.errors)
    # What the pasted file held that ctxsim does not simulate, shown on the page it opens.
    for note in profiles.import_notes(tool, text):
        messages.info(request, f"Imported {saved.name}; not read: {note}")
    return _to_page(request, session, urlencode({"profile": saved.ref}))


@require_POST
def profile_delete(request: HttpRequest, session_id: int, profile_id: int) -> HttpResponse:
    """Delete a team profile (who may save one may delete it): the way out of one that no
    longer suits, or that broke the page (issue 20 item 14)."""
    session, _ = scoped_session(request, session_id, "write")
    saved, _ = get_scoped(SavedProfile.objects.filter(team=session.team), request.user,
                          "write", pk=profile_id)
    saved.delete()
    return _to_page(request, session, urlencode({"profile": default_profile_for(session.format)}))


def _profile_form_error(request, session, which: str, errors: dict[str, str]) -> HttpResponse:
    """A 400 with the field messages (htmx swaps them into the form; without JS, a page)."""
    context = {"session": session, "which": which, "errors": errors, "post": request.POST}
    response = render_page_or_partial(request, "replays/profile_forms.html", "profile-errors",
                                      context)
    response.status_code = 400
    return response


def _to_page(request: HttpRequest, session, query: str) -> HttpResponse:
    url = f"{reverse('session-detail', args=[session.pk])}?{query}"
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)

