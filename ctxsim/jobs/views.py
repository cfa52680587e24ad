"""The one poll of every background job (`ctxsim.jobs.poll`). Parse → service → render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from django_htmx.http import HttpResponseClientRefresh

from ctxsim.jobs import poll
from ctxsim.jobs.models import Status

TEMPLATE = "jobs/poll.html"


@never_cache
@require_safe
def job_poll(request: HttpRequest, job_id: int) -> HttpResponse:
    """A job's (or a group's, `also`) status while pending; once ended its message and where
    its result is (see `ctxsim.jobs.poll`)."""
    group = poll.polled(request.user, job_id, request.GET.getlist("also"),
                        request.GET.get("page", ""))
    if group.is_active:
        return render(request, f"{TEMPLATE}#pending", {"job": group})
    result = poll.result_of(group.jobs[0])
    current = request.htmx.current_url if request.htmx else None
    url = poll.kept_page(result, group.page or current)
    if not request.htmx:
        return redirect(url)  # the kind's own address (or one of its pages): never the query's
    load = group.status == Status.DONE or result.on_failure
    if load and result.refresh:
        return HttpResponseClientRefresh()  # the page is the result (a trace downloads)
    return render(request, f"{TEMPLATE}#ended", {"job": group, "url": url, "load": load})
