"""What the session page answers while a long session's replay runs in the worker.

`ctxsim.replays.background` decides when a replay is handed to the worker; the views raise
`ReplayPending` with its row and answer with `pending_page`: "Replaying in the background — N
of M calls", its job polled (`ctxsim.jobs.poll`), in place of the region an htmx request
reloads (the replay or the call view, which the page then loads as usual once the replay is
stored), or as a page of its own (202) that reloads as the session page once it is stored.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import push_url

from ctxsim.htmx import target_id
from ctxsim.jobs import poll
from ctxsim.replays import background

TEMPLATE = "replays/pending.html"
# The region of the pending page of its own; loading it once stored gets a client refresh.
PENDING_REGION = "replay-pending"


class ReplayPending(Exception):
    """The replay runs in the worker: the request shows its progress instead of replaying."""

    def __init__(self, row) -> None:
        super().__init__(row)
        self.row = row


def pending_page(request: HttpRequest, session, settings, row,
                 regions: Mapping[str, str]) -> HttpResponse:
    """The pending replay's progress, in the region the request swaps (one of `regions`, the
    page's partials by DOM id) or as a page of its own."""
    target = target_id(request)
    region = target if target in regions else PENDING_REGION
    context = {"session": session, "settings": settings, "replay": row,
               "progress": background.progress_of(row), "region": region,
               "bound": background.inline_bound(), "page_url": request.get_full_path()}
    if request.htmx:
        response = render(request, f"{TEMPLATE}#replay-pending", context)
        if region != PENDING_REGION:
            push_url(response, request.get_full_path())
        return response
    return render(request, TEMPLATE, context, status=202)


CALL_TEMPLATE = "replays/call_pending.html"
# The region of a call's pending page of its own; its poll gets a client refresh once made.
CALL_PENDING_REGION = "call-pending"


def call_pending(request: HttpRequest, session, settings, row,
                 regions: Mapping[str, str] = {}) -> HttpResponse:  # noqa: B006 - read only
    """A deep call's progress while the worker replays to it (`ctxsim.replays.deep_calls`):
    in place of the element the htmx request swaps — a region of the page (one of `regions`),
    a fold (`fold-…`) or a message body (`body-…`) — or as a page of its own (202). Each
    polls the job (`ctxsim.jobs.poll`, kind "call") with this request's address as the
    region's (`page`), which the poll loads into the region once the part is made: what the
    region stands for, or, for the page of its own, a client refresh."""
    target = target_id(request) or ""
    where = target.split("-", 1)[0] if target.startswith(("fold-", "body-")) else "call"
    region = target if where != "call" or target in regions else CALL_PENDING_REGION
    context = {"session": session, "settings": settings, "job": row,
               "progress": background.progress_of(row), "region": region,
               "bound": background.inline_bound(), "page_url": request.get_full_path(),
               "poll": poll.watch([row], page=request.get_full_path())}
    if request.htmx:
        response = render(request, f"{CALL_TEMPLATE}#{where}-pending", context)
        if region in regions:
            push_url(response, request.get_full_path())
        return response
    return render(request, CALL_TEMPLATE, context, status=202)


def still_replaying() -> HttpResponse:
    """A fragment of a replay that is not stored yet (its rows, a message body)."""
    return HttpResponse("This replay is running in the background; open the session page to "
                        "follow it.\n", status=202, content_type="text/plain; charset=utf-8")
