"""Comments, review status and activity of a session. Parse → service → render.

Every object comes through `get_scoped` (outsiders 404, viewers writing 403). With htmx a write
answers with the region it changed (a thread block, the review bar) plus the activity list out
of band; without JavaScript it redirects to the comment's permalink or the session page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ctxsim.htmx import render_page_or_partial
from ctxsim.pipeline.params import ascii_index
from ctxsim.reviews import services
from ctxsim.reviews.models import Comment
from ctxsim.teams.access import get_scoped
from ctxsim.teams.current import request_memberships
from ctxsim.transcripts.models import Session

TEMPLATE = "reviews/review.html"


def _session(request: HttpRequest, session_id: int, action: str = "read"):
    return get_scoped(Session.objects.all(), request.user, action,
                      memberships=request_memberships(request), pk=session_id)


def _comment(request: HttpRequest, comment_id: int, action: str = "read"):
    return get_scoped(
        Comment.objects.select_related("session"), request.user, action,
        team_field="session__team", pk=comment_id,
    )


def _index(raw: str | None) -> int | None:
    """A call or message index from a form; empty means "none", garbage means refused."""
    if raw in (None, ""):
        return None
    index = ascii_index(raw)
    if index is None:
        raise services.ReviewError("Not a valid position.")
    return index


def session_url(session_id: int, call_index: int | None, fragment: str = "") -> str:
    url = reverse("session-detail", args=[session_id])
    if call_index is not None:
        url += f"?call={call_index}"
    return url + (f"#{fragment}" if fragment else "")


@require_http_methods(["GET", "POST"])
def comment_create(request: HttpRequest, session_id: int) -> HttpResponse:
    """POST adds a comment. GET shows the anchor's thread block with its form: the call view
    links uncommented messages here instead of rendering a form for each of thousands."""
    session, membership = _session(request, session_id, "write")
    if request.method == "GET":
        try:
            call, message = _index(request.GET.get("call")), _index(request.GET.get("message"))
        except services.ReviewError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain")
        if request.htmx:
            return _block(request, session, membership, call, message)
        threads = services.anchor_threads(session, call, message)
        return render(request, "reviews/comment_form.html", {
            "session": session, "threads": threads, "call": call, "message": message,
            "can_write": True, "back": session_url(session.pk, call)})
    parent = None
    try:
        if request.POST.get("parent"):
            parent, _ = _comment(request, _index(request.POST["parent"]) or 0, "write")
        call, message = _index(request.POST.get("call")), _index(request.POST.get("message"))
        comment = services.add_comment(session, request.user, request.POST.get("body", ""),
                                       call_index=call, message_index=message, parent=parent)
    except services.ReviewError as exc:
        return _refused(request, session, membership, str(exc), parent)
    if request.htmx:
        return _block(request, session, membership, comment.call_index, comment.message_index)
    return redirect(session_url(session.pk, comment.call_index, comment.dom_id))


@require_POST
def comment_resolve(request: HttpRequest, comment_id: int) -> HttpResponse:
    comment, membership = _comment(request, comment_id, "write")
    services.set_resolved(comment, request.user, request.POST.get("resolved") != "0")
    if request.htmx:
        return _block(request, comment.session, membership, comment.call_index,
                      comment.message_index)
    root = comment.parent_id or comment.pk
    return redirect(session_url(comment.session_id, comment.call_index, f"comment-{root}"))


@require_GET
def comment_permalink(request: HttpRequest, comment_id: int) -> HttpResponse:
    """Open the session at the comment's call, scrolled to the comment (access checked here)."""
    comment, _ = _comment(request, comment_id)
    return redirect(session_url(comment.session_id, comment.call_index, comment.dom_id))


@require_POST
def review_status(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = _session(request, session_id, "write")
    try:
        services.set_status(session, request.user, request.POST.get("status", ""))
    except services.ReviewError as exc:
        return _refused(request, session, membership, str(exc))
    if request.htmx:
        session.refresh_from_db()
        review = services.review_for(session, membership, None)
        context = {"session": session, "review": review, "activity": review.activity,
                   "oob_activity": True}
        return render(request, f"{TEMPLATE}#status-response", context)
    return redirect(session_url(session.pk, None))


@require_GET
def activity(request: HttpRequest, session_id: int) -> HttpResponse:
    """The whole activity list of a session (the session page shows the latest entries)."""
    session, _ = _session(request, session_id)
    entries = services.activity_for(session, limit=10_000)
    return render_page_or_partial(request, "reviews/activity.html", "activity",
                                  {"session": session, "activity": entries})


def _block(request, session, membership, call_index, message_index, error="", draft=None):
    threads = services.anchor_threads(session, call_index, message_index)
    context = {
        "session": session, "threads": threads, "call": call_index, "message": message_index,
        "can_write": membership.can_write, "error": error, "draft": draft or {},
        "activity": services.activity_for(session), "oob_activity": True,
        "count": sum(1 + len(t.thread_replies) for t in threads),
    }
    return render(request, f"{TEMPLATE}#block-response", context)


def _refused(request, session, membership, message: str, parent=None) -> HttpResponse:
    """The form's message: swapped into the thread block with htmx, else a small page (400)."""
    post = request.POST
    if request.htmx:
        anchor = parent or Comment(call_index=_safe_index(post.get("call")),
                                   message_index=_safe_index(post.get("message")))
        draft = {"body": post.get("body", ""), "parent": post.get("parent", "")}
        return _block(request, session, membership, anchor.call_index, anchor.message_index,
                      error=message, draft=draft)
    back = session_url(session.pk, _safe_index(post.get("call")))
    return render(request, "reviews/refused.html",
                  {"session": session, "message": message, "back": back}, status=400)


def _safe_index(raw: str | None) -> int | None:
    try:
        return _index(raw)
    except services.ReviewError:
        return None
