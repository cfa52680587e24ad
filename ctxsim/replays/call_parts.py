"""The call view's parts a page loads on demand (SPEC §8): a fold's rows, a message's whole
body or its change. Each checks team membership and replays as the session page does: a long
session's deep call is the worker's (`ctxsim.replays.deep_calls`), polled meanwhile.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe
from django_htmx.http import HttpResponseClientRefresh

from ctxsim.htmx import target_id
from ctxsim.pipeline.params import ascii_index
from ctxsim.pipeline.profiles import default_profile_for
from ctxsim.replays import call_view, deep_calls
from ctxsim.replays.alignment import STATUSES
from ctxsim.replays.message_list import Fold, diff_html, join_rows, show_all_link
from ctxsim.replays.pending import CALL_PENDING_REGION, ReplayPending, call_pending, still_replaying
from ctxsim.replays.state import settings_from_query
from ctxsim.replays.views import comment_boxes, run_and_call, scoped_session
from ctxsim.reviews import services as reviews


@require_safe
def message_rows(request: HttpRequest, session_id: int) -> HttpResponse:
    """The rows of one fold of a call view (`from`, `to`), at most `call_view.FOLD_PAGE` of them,
    with a fold for the rest: htmx swaps them in place of the fold; without JavaScript they
    open on a page of their own."""
    session, membership = scoped_session(request, session_id)
    settings, _errors = settings_from_query(request.GET, session.team, session=session)
    try:
        run, call = run_and_call(request, session, settings)
    except ReplayPending:
        return still_replaying()
    start_at, end_at = ascii_index(request.GET.get("from")), ascii_index(request.GET.get("to"))
    if start_at is None or end_at is None or start_at >= end_at:
        raise Http404("No such rows in this call.")
    stop = min(end_at, start_at + call_view.FOLD_PAGE)
    try:
        rows = deep_calls.rows_html(session, settings, run, call, range(start_at, stop),
                                    request.user)
    except deep_calls.CallPending as pending:
        return call_pending(request, session, settings, pending.row)
    if target_id(request) == CALL_PENDING_REGION:
        return HttpResponseClientRefresh()  # made now: the pending page reloads as the rows
    if not rows:
        raise Http404("No such rows in this call.")
    # The rest of the fold, unless these rows reached the call's end.
    status = request.GET.get("fold")  # what the fold said of its rows, said again of the rest
    status = status if status in STATUSES and status != "unchanged" else None
    rest = [Fold(stop, end_at, None, status)] if stop < end_at and rows[-1][0] == stop - 1 else []
    review = reviews.page_context(session, membership, call)
    html = join_rows(rows, comment_boxes(request, session, call, rows, review), folds=rest,
                     fold_link={"session_id": session.pk, "call_index": call,
                                "query": settings.query()}, wrap=not request.htmx)
    if request.htmx:
        return HttpResponse(html)
    return render(request, "replays/message_rows.html", {
        "session": session, "call_index": call, "first": start_at, "last": stop - 1,
        "messages_html": html,
        "back": f"{reverse('session-detail', args=[session.pk])}?{settings.query(call)}",
    })


@require_safe
def message_body(request: HttpRequest, session_id: int) -> HttpResponse:
    """The whole body of one message of one call ("show all" in the call view), or with
    `diff=1` its before/after diff ("show the change")."""
    session, _ = scoped_session(request, session_id)
    settings, _errors = settings_from_query(request.GET, session.team,
                                           default_profile_for(session.format),
                                           session=session)
    try:
        run, call = run_and_call(request, session, settings)
    except ReplayPending:
        return still_replaying()
    position = ascii_index(request.GET.get("row"))
    diff, head = request.GET.get("diff") == "1", request.GET.get("part") == "head"
    try:
        parts = None if position is None else deep_calls.message_body(
            session, settings, run, call, position,
            ("diff", "head" if head else "full") if diff else ("head" if head else "full",),
            request.user)
    except deep_calls.CallPending as pending:
        return call_pending(request, session, settings, pending.row)
    if target_id(request) == CALL_PENDING_REGION:
        return HttpResponseClientRefresh()  # made now: the pending page reloads as the body
    if parts is None or position is None:
        raise Http404("No such message in this call.")
    if diff and parts["diff"] is not None:
        # The change of a message rewritten before this call (its row shows the sent text).
        return HttpResponse(diff_html(parts["diff"], f"body-{call}-{position}"))
    # "show all" and "show less" swap the body and, out of band, the link for the other one.
    text, hidden = parts["head" if head else "full"]
    others = request.GET.copy()
    others.pop("part", None)
    toggle_url = f"{request.path}?{others.urlencode()}" + ("" if head else "&part=head")
    return render(request, "replays/message_body.html", {
        "text": text, "hidden": hidden, "full": not head, "call_index": call,
        "index": int(position),
        "toggle": show_all_link(toggle_url, f"toggle-{call}-{position}", more=head, oob=True),
    })
