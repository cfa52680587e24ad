"""One poll for every background job (issues 30 and 31): `GET /jobs/<pk>/`.

Every page that waits for the worker (the session page's background replay, a trace file, the
insights columns, an import, a sweep, the team overview, a corpus sweep) shows a small status
element, `templates/jobs/poll.html#pending`, inside the region the job's result will fill (an
element of class `job-region`). That element polls this module's view and is replaced by its
answer, a few hundred bytes whatever the job:

- **Pending** (queued or running): the same element again (status, `done` of `total`, the
  progress bar, the job's message), still polling — every second, or `EVERY` for the kinds
  that ask for less.
- **Ended**: the job's end (`templates/jobs/poll.html#ended`): failed and cancelled jobs
  show their message. Once the result is there (done, or any end for the kinds whose region
  shows its own failure: `Result.on_failure`) the element loads the region once
  (`hx-trigger="load"`, `hx-target="closest .job-region"`), which renders without a poll, so
  polling stops; or, for a job whose page is its result (a trace file), the answer asks the
  browser to reload the page (`HX-Refresh`).

**Where the result is** is the kind's to say (`RESULTS`, one function per kind, from the job's
own fields: never a URL taken from the request, so no open redirect). A page that shows a
result with view state of its own (the session page's call and filters, the insights page's
profiles, the overview's filters) keeps its query: when the polling page's own path
(`HX-Current-URL`, the page htmx polls from) is one of the kind's pages for this job
(`Result.pages`: URL names and arguments), its path and query are loaded, re-encoded; any
other address gives the kind's own URL. A region that is a fragment of its own address (a
deep call's fold rows or message body, `templates/replays/call_pending.html`) stands on a
page that is not its result: its poll says the region's address (`?page=`, kept in every
re-poll), which is checked the same way instead of the polling page's.

**Several jobs at once.** A page that waits for several jobs of one kind (the insights page's
columns, the overview's columns) polls them as one group: `GET /jobs/<pk>/?also=<pk>&...` (at
most `MAX_GROUP`), answered as one element — the jobs ended of the jobs asked, their summed
progress, the first message — and ended once every job of the group has; the result is the
first job's. The overview polls its columns' pending `ColumnTask`s, a corpus sweep its last
part (the one the quota counts). A region still incomplete after its jobs ended (other parts
still running, a row queued again after its worker died, work queued by a command) then
reloads itself after a pause (`templates/jobs/poll.html
#again`) until it is complete.

**Who may poll.** Every job of the request must belong to a team the user is a member of:
otherwise (an outsider, an unknown id, one foreign id in a group) 404, in one query (the
membership is part of it). A poll settles the lost jobs it reads (`lifecycle.settle`), so a
job whose worker died says so instead of polling forever.

Without JavaScript nothing polls: the pages keep their `<noscript>` refresh (a meta refresh, a
link), and a direct visit of `/jobs/<pk>/` (no htmx) is sent to the job's result once it
ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.http import Http404
from django.urls import Resolver404, resolve, reverse

from ctxsim.jobs import lifecycle
from ctxsim.jobs.models import PENDING, Job, Status

MAX_GROUP = 50
# Seconds between two polls (1 unless the kind asks for less).
EVERY = {"insights": 2, "trace": 2}
# How a kind's status element looks: its progress bar's class, what a screen reader hears,
# and what `done` of `total` counts (nothing: a percent only).
LOOK = {
    "import": ("import-progress", "Import progress", ""),
    "sweep": ("sweep-progress", "Sweep progress", "combinations"),
    "replay": ("replay-progress", "Replay progress", "calls"),
    "trace": ("trace-progress", "Trace progress", "calls"),
    "insights": ("insights-bar", "Progress of the columns", ""),
    "overview": ("overview-progress", "Overview progress", ""),
    "corpus": ("sweep-progress", "Corpus sweep progress", ""),
    "call": ("call-progress", "Replay progress", "calls"),
}
# The longest region address (`page`) a poll keeps; a longer one is dropped.
MAX_PAGE = 2000


@dataclass(frozen=True)
class Result:
    """Where a job's result is: `url`, the kind's own address of it; `pages`, the pages that
    show it with a query of their own (URL name and the arguments that must match);
    `refresh`, the polling page is the result itself (it reloads); `on_failure`, the region
    shows a failed or cancelled job itself (loaded on any end; else only once done)."""

    url: str
    pages: tuple[tuple[str, dict[str, Any]], ...] = ()
    refresh: bool = False
    on_failure: bool = True


def _session_pages(job: Any, *names: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple((name, {"session_id": job.session_id}) for name in names)


def _import(job: Any) -> Result:
    return Result(reverse("import-job", args=[job.pk]))


def _sweep(job: Any) -> Result:
    return Result(reverse("sweep-detail", args=[job.session_id, job.pk]))


def _insights(job: Any) -> Result:
    page = reverse("session-insights", args=[job.session_id])
    return Result(f"{page}?{job.query}", _session_pages(job, "session-insights"))


def _replay(job: Any) -> Result:
    # A failed replay is queued again when its page is opened: never opened by the poll.
    page = reverse("session-detail", args=[job.session_id])
    return Result(f"{page}?{job.query}",
                  _session_pages(job, "session-detail", "session-compare"), on_failure=False)


def _trace(job: Any) -> Result:
    query = job.query + ("&summary=1" if job.summary else "&summary=0")
    return Result(f"{reverse('session-trace', args=[job.session_id])}?{query}", refresh=True,
                  on_failure=False)


def _call(job: Any) -> Result:
    # A deep call's part (ctxsim.replays.deep_calls): the call view, a fold's rows, a body.
    from ctxsim.replays.deep_calls import address

    url, names = address(job)
    return Result(url, _session_pages(job, *names))


def _overview(job: Any) -> Result:
    return Result(reverse("team-overview"), (("team-overview", {}),))


def _corpus(job: Any) -> Result:
    url = reverse("corpus-sweep-detail", args=[job.corpus_id])
    return Result(url, (("corpus-sweep-detail", {"corpus_sweep_id": job.corpus_id}),))


RESULTS: dict[str, Callable[[Any], Result]] = {
    "import": _import, "sweep": _sweep, "insights": _insights, "replay": _replay,
    "trace": _trace, "overview": _overview, "corpus": _corpus, "call": _call,
}


def result_of(job: Job) -> Result:
    maker = RESULTS.get(job.kind)
    if maker is None:
        raise Http404("This job has no page.")
    return maker(job)


def kept_page(result: Result, current: str | None) -> str:
    """The polling page's own path and query when it is one of the result's pages (see the
    module's docstring), else the kind's own URL."""
    if not current or not result.pages:
        return result.url
    parts = urlsplit(current)
    try:
        match = resolve(parts.path)
    except Resolver404:
        return result.url
    for name, kwargs in result.pages:
        if match.url_name == name and all(match.kwargs.get(k) == v for k, v in kwargs.items()):
            query = urlencode(parse_qsl(parts.query, keep_blank_values=True))
            return reverse(name, kwargs=match.kwargs) + (f"?{query}" if query else "")
    return result.url


@dataclass
class Group:
    """Several jobs polled as one (see the module's docstring); the attributes a page's
    status element reads from a single job."""

    jobs: list[Job]
    page: str = ""  # the region's own address, when it is not the polling page's
    ended_jobs: list[Job] = field(init=False)

    def __post_init__(self) -> None:
        if not self.jobs:
            raise ValueError("a group needs a job")
        self.ended_jobs = [job for job in self.jobs if job.status not in PENDING]

    @property
    def pk(self) -> int:
        return self.jobs[0].pk

    @property
    def kind(self) -> str:
        return self.jobs[0].kind

    @property
    def status(self) -> str:
        statuses = {job.status for job in self.jobs}
        for status in (Status.RUNNING, Status.QUEUED, Status.FAILED, Status.CANCELLED):
            if status in statuses:
                return status
        return Status.DONE

    def get_status_display(self) -> str:
        return Status(self.status).label

    @property
    def is_active(self) -> bool:
        return self.status in PENDING

    @property
    def done(self) -> int:
        return sum(job.done for job in self.jobs)

    @property
    def total(self) -> int:
        return sum(job.total for job in self.jobs)

    @property
    def percent(self) -> int:
        """The jobs' own progress; jobs that count no steps (an overview column): the share
        ended."""
        if not any(job.total for job in self.jobs):
            return self.ended * 100 // len(self.jobs)
        return sum(job.percent for job in self.jobs) // len(self.jobs)

    @property
    def message(self) -> str:
        return next((job.message for job in self.jobs if job.message), "")

    @property
    def count(self) -> int:
        return len(self.jobs)

    @property
    def ended(self) -> int:
        return len(self.ended_jobs)

    @property
    def poll_url(self) -> str:
        return poll_url(self.jobs, self.page)

    @property
    def poll_every(self) -> int:
        return EVERY.get(self.kind, 1)

    @property
    def poll_look(self) -> tuple[str, str, str]:
        return look(self.kind)


def look(kind: str) -> tuple[str, str, str]:
    return LOOK.get(kind, ("", "Progress", ""))


def poll_url(jobs: Sequence[Job], page: str = "") -> str:
    url = reverse("job-poll", args=[jobs[0].pk])
    rest: list[tuple[str, Any]] = [("also", job.pk) for job in jobs[1:]]
    if page:
        rest.append(("page", page))
    return f"{url}?{urlencode(rest)}" if rest else url


def watch(jobs: Iterable[Job], page: str = "") -> Group | None:
    """The group a page polls for these jobs (`page`: the address of the region it stands
    in, when that is not the page's own), None without any."""
    rows = list(jobs)
    return Group(rows, page) if rows else None


def _ids(first: int, also: Iterable[str]) -> list[int]:
    ids = [first]
    for raw in also:
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            raise Http404("No such job.")
        if int(raw) not in ids:
            ids.append(int(raw))
    if len(ids) > MAX_GROUP:
        raise Http404("Too many jobs in one poll.")
    return ids


def polled(user: Any, first: int, also: Iterable[str] = (), page: str = "") -> Group:
    """The jobs of a poll, each as its kind's row, their lost ones settled: 404 unless every
    one belongs to a team `user` is a member of. `page` (the region's address) is kept as
    asked, only ever read through `kept_page`."""
    ids = _ids(first, also)
    if not getattr(user, "is_authenticated", False):
        raise Http404("No such job.")
    rows = list(Job.objects.filter(pk__in=ids, team__memberships__user=user))
    if len(rows) != len(ids):
        raise Http404("No such job.")
    if lifecycle.settle(among=rows):  # a worker went away: queued again, or failed
        rows = list(Job.objects.filter(pk__in=ids))
    by_pk = {job.pk: job for job in rows}
    for kind in {job.kind for job in rows}:
        if kind in lifecycle.KINDS:  # the kind's own row (its progress, its fields)
            for row in lifecycle.KINDS[kind].model.objects.filter(pk__in=list(by_pk), kind=kind):
                by_pk[row.pk] = row
    return Group([by_pk[pk] for pk in ids], page if len(page) <= MAX_PAGE else "")
