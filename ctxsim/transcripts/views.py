"""Sessions list, upload page and background import jobs. Parse → service → render.

Everything is scoped to the team the user works in (`current_membership`); single objects are
fetched through `get_scoped`, so outsiders get 404 and read-only members get 403 on writes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from urllib.parse import parse_qsl, urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.datastructures import MultiValueDict
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ctxsim.htmx import render_page_or_partial
from ctxsim.teams.access import check_role, get_membership, get_scoped
from ctxsim.teams.current import current_membership, current_membership_for
from ctxsim.transcripts import search, services, upload_results
from ctxsim.transcripts.forms import SessionFilterForm, UploadForm
from ctxsim.transcripts.models import ImportJob, Session


@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    membership = current_membership(request)
    if membership is None:
        return render(request, "transcripts/session_list.html", {"page": None})
    form = SessionFilterForm(request.GET, formats=services.team_formats(membership.team))
    filters = services.SessionFilters(
        format=form.value("format"), status=form.value("status"), query=form.value("q"),
        project=form.value("project"), host=form.value("host"),
        contents=bool(form.is_valid() and form.cleaned_data.get("contents")),
    )
    page = services.list_sessions(membership.team, filters, request.GET.get("page"))
    rows = [(_row(request, s, False), [_row(request, c, True) for c in s.sidechain_rows])
            for s in page.object_list]
    context = {"form": form, "page": page, "rows": rows,
               "filtered": filters != services.SessionFilters()}
    return render_page_or_partial(request, "transcripts/session_list.html", "session-table",
                                  context)


# A session's row of the list as the template rendered it, by everything the row shows (the
# fields `transcripts/session_row.html` reads, and the query its filter links keep): the list
# is a fifth of what reviewers ask for, and its rows were most of its rendering (issue 31).
_ROWS: OrderedDict[tuple, str] = OrderedDict()
_ROWS_KEPT = 2000
_ROWS_LOCK = threading.Lock()


def _row(request: HttpRequest, s: Session, sidechain: bool) -> str:
    key = (sidechain, request.GET.urlencode(), s.pk, s.created_at, s.title, s.source_name,
           s.origin_cwd, s.origin_host, s.format, s.model_call_count, s.tool_result_count,
           s.error_result_count, s.peak_raw_tokens, s.peak_sent_tokens, s.replay_errors,
           s.review_status, s.uploaded_by.get_username() if s.uploaded_by else None)
    with _ROWS_LOCK:
        html = _ROWS.get(key)
        if html is not None:
            _ROWS.move_to_end(key)
            return html
    html = render_to_string("transcripts/session_row.html", {"s": s, "sidechain": sidechain},
                            request)
    with _ROWS_LOCK:
        _ROWS[key] = html
        while len(_ROWS) > _ROWS_KEPT:
            _ROWS.popitem(last=False)
    return html


def _csrf_checked(request: HttpRequest) -> HttpResponse:  # the view the CSRF check is run for
    return HttpResponse()


_CSRF = CsrfViewMiddleware(_csrf_checked)


@csrf_exempt  # checked below, once the role is: the CSRF check reads (spools) the whole body
@require_http_methods(["GET", "POST"])
def upload(request: HttpRequest) -> HttpResponse:
    """The upload form; a valid POST imports and redirects to its results page, so reloading
    the results never imports again (post/redirect/get).

    Membership and role are checked before anything reads the body (issue 28 item 12): a
    viewer's or an outsider's upload is refused without spooling its files."""
    try:
        membership = current_membership_for(request,
                                            "write" if request.method == "POST" else "read")
    except (PermissionDenied, Http404):
        # Django's 403 and 404 pages run the CSRF check, which would read the body now.
        request._post, request._files = QueryDict(), MultiValueDict()
        raise
    if request.method == "POST":
        refused = _CSRF.process_view(request, _csrf_checked, (), {})
        if refused is not None:
            return refused
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        results = services.import_uploads(
            form.cleaned_data["files"],
            team=membership.team,
            user=request.user,
            format=form.cleaned_data["format"],
        )
        batch = upload_results.store(request.session, membership.team, results,
                                     form.cleaned_data["format"])
        return redirect("upload-results", batch=batch)
    return _upload_page(request, form, [])


def _upload_page(request: HttpRequest, form, results, batch: str = "") -> HttpResponse:
    membership = current_membership(request)
    team = membership.team if membership is not None else None
    jobs = list(services.jobs_to_show(team, besides=results)) if team else []
    # A job whose worker went away is shown settled (queued again, done or failed), not running.
    if jobs and services.fail_stuck_jobs(among=jobs):
        jobs = list(services.jobs_to_show(team, besides=results))
    context = {
        "form": form,
        "results": results,
        "batch": batch,
        "jobs": jobs,
        "limit": services.size_limit_text(),
    }
    return render(request, "transcripts/upload.html", context)


@require_GET
def upload_result_page(request: HttpRequest, batch: str) -> HttpResponse:
    """What one upload did, file by file; only its uploader has it (in their session)."""
    team_id = upload_results.batch_team(request.session, batch)
    if team_id is None or get_membership(request.user, team_id) is None:
        raise Http404("These upload results are not kept any more.")
    return _upload_page(request, UploadForm(), upload_results.load(request.session, batch),
                        batch)


@require_POST
def upload_again(request: HttpRequest, batch: str, index: int) -> HttpResponse:
    """Import a file whose bytes the team already had, as the user asked ("import again")."""
    current_membership_for(request, "write")
    team_id = upload_results.batch_team(request.session, batch)
    membership = get_membership(request.user, team_id) if team_id is not None else None
    if membership is None:
        raise Http404("These upload results are not kept any more.")
    check_role(membership, "write")
    kept = upload_results.take_kept(request.session, batch, index)
    if kept is None:
        raise Http404("That file was imported again already, or is not kept any more.")
    result = services.import_kept(kept["kept"], name=kept["name"], size=kept["size"],
                                  sha256=kept["sha256"], team=membership.team,
                                  user=request.user, format=kept["format"],
                                  redactions=kept.get("kept_redactions"))
    again = upload_results.store(request.session, membership.team, [result], kept["format"])
    return redirect("upload-results", batch=again)


@require_GET
def import_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job, membership = get_scoped(ImportJob.objects.select_related("user"), request.user, pk=job_id)
    if services.fail_stuck_jobs(among=[job]):  # its worker went away: say so, stop polling
        job.refresh_from_db()
    return render_page_or_partial(request, "transcripts/import_job.html", "import-job",
                                  {"job": job, "membership": membership})


@require_POST
def requeue_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job, _ = get_scoped(ImportJob.objects.all(), request.user, "write", pk=job_id)
    problem = services.requeue(job)
    if problem:
        messages.error(request, f"{job.file_name}: {problem}")
    else:
        messages.success(request, f"{job.file_name}: queued again.")
    return redirect("upload")


@require_POST
def session_delete(request: HttpRequest, session_id: int) -> HttpResponse:
    """Owners delete a session (with its sidechains, replays, spills and review)."""
    session, _ = get_scoped(Session.objects.all(), request.user, "manage", pk=session_id)
    title = session.title
    services.delete_session(session)
    messages.success(request, f"Deleted “{title}”.")
    return redirect("home")


@require_POST
def session_rename(request: HttpRequest, session_id: int) -> HttpResponse:
    """Owners give a session a title of their own; back to the page in the state it was in."""
    session, _ = get_scoped(Session.objects.all(), request.user, "manage", pk=session_id)
    problem = services.rename_session(session, request.POST.get("title", ""))
    if problem:
        messages.error(request, f"Not renamed: {problem}.")
    # Only the query of the page comes back, re-encoded: never a place of the user's choosing.
    state = urlencode(parse_qsl(request.POST.get("state", ""), keep_blank_values=True))
    return redirect(f"{reverse('session-detail', args=[session.pk])}?{state}")


@require_GET
def search_contents(request: HttpRequest) -> HttpResponse:
    """Messages of the current team's sessions that hold the text (contents and arguments)."""
    membership = current_membership_for(request)
    query = request.GET.get("q", "")
    hits: list[search.Hit] = []
    error = ""
    if query.strip():
        try:
            hits = search.search(membership.team, query)
        except search.SearchError as exc:
            error = str(exc)
    # A refused query is the form again with its reason (400); a NUL never reaches the page.
    shown = query if not error else "".join(c for c in query if c.isprintable() or c == " ")
    return render(request, "transcripts/search.html",
                  {"query": shown, "hits": hits, "error": error, "team": membership.team},
                  status=400 if error else 200)
