"""The cache & information-loss page and sweeps: from a request's query to pure insights.

Settings come from `ctxsim.replays.state`, sessions from `ctxsim.replays.services`; the
analysis itself is `ctxsim.insights` (pure). Sweeps small enough run in the request; larger
ones go to the task worker (`tasks.py`, imported here, never importing this module) and
record their progress on the `Sweep` row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings as django_settings
from django.db import transaction
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

# The page's cache choice is part of this module's API (the views call it through here).
from ctxsim.analysis.choices import CacheChoice, cache_choice
from ctxsim.analysis.choices import all_lifetimes as all_lifetimes
from ctxsim.analysis.choices import model_options as model_options
from ctxsim.analysis.models import InsightsJob, Sweep
from ctxsim.analysis.results import insights_for, rule_key, stored_insights
from ctxsim.analysis.tasks import enqueue as enqueue_sweep
from ctxsim.analysis.tasks import enqueue_insights, insights_timeout, run_sweep_job
from ctxsim.insights import sweep as sweeps
from ctxsim.insights.prices import CacheRule
from ctxsim.insights.recorded import RecordedComparison, compare
from ctxsim.insights.report import ProfileInsights
from ctxsim.jobs import lifecycle, policy
from ctxsim.pipeline.calibration import calibrate
from ctxsim.pipeline.usage import recorded_per_call
from ctxsim.replays import profiles
from ctxsim.replays import services as replays
from ctxsim.replays.limits import replay_slot
from ctxsim.replays.state import ReplaySettings, session_settings, settings_from_query

DEFAULT_PROFILES = ("none", "chatcli", "aivax")
# Sweeps whose work (combinations x model calls) is above this run in the task worker.
INLINE_SWEEP_WORK = 1200

# The insights page (issue 20 item 5): call replays (session calls × profiles not stored yet)
# one request computes itself; past that they go to the task worker, and past the maximum
# nothing runs. A worker's job queued or running longer than the timeout is taken as lost.
DEFAULT_INSIGHTS_INLINE_CALLS = 2_000
DEFAULT_INSIGHTS_MAX_CALLS = 40_000


# --- the cache & information-loss page ---------------------------------------------------------


@dataclass
class Column:
    """One profile's replay seen through the cache."""

    ref: str
    label: str
    settings: ReplaySettings
    insights: ProfileInsights

    @property
    def query(self) -> str:
        return self.settings.query()

    @property
    def hit_percent(self) -> float:
        return self.insights.hit_rate * 100

    @property
    def breaks(self) -> list[dict[str, Any]]:
        """Every break, with its compaction event (break-even) when it is one."""
        events = {e.call: e for e in self.insights.events}
        return [{"row": r, "event": events.get(r.index)} for r in self.insights.breaks]


def profile_refs(query: QueryDict) -> tuple[list[str], bool]:
    """The profiles to show side by side, and whether the page's own settings lead them (the
    session page links here with its query, so its tuned parameters get a column)."""
    refs = [r for r in query.getlist("profiles") if r] or list(DEFAULT_PROFILES)
    return list(dict.fromkeys(refs)), "profile" in query


def insight_columns(session, query: QueryDict, rule: CacheRule, canonical=None, *,
                    user: Any = None) -> tuple[list[Column], dict[str, str]]:
    """The columns ready now and the errors (`insights_view` without what is pending)."""
    view = insights_view(session, query, rule, canonical, user=user)
    return view.columns, view.errors


@dataclass
class InsightsView:
    columns: list[Column]  # ready, in the page's order
    errors: dict[str, str]
    pending: list[tuple[str, InsightsJob]]  # (label, job) the worker is computing

    @property
    def computing(self) -> bool:
        """Whether the page should poll: a job is queued or running."""
        return any(job.status != InsightsJob.Status.FAILED for _, job in self.pending)

    @property
    def progress(self) -> InsightsProgress:
        """What the page's progress line (and each poll after it) says."""
        active = [(label, job) for label, job in self.pending
                  if job.status != InsightsJob.Status.FAILED]
        return InsightsProgress(len(self.columns), len(self.columns) + len(self.pending), active)


def insights_view(session, query: QueryDict, rule: CacheRule, canonical=None, *,
                  user: Any = None) -> InsightsView:
    """Each chosen profile's replay seen through the cache (issue 20 item 5, issue 21).

    A result stored before (a visit, a sweep point, the worker) is read whatever the size of
    the session. The others are computed here while their work (calls × profiles still to
    compute) is at most CTXSIM_INSIGHTS_INLINE_CALLS, taking one of the user's replay slots
    (`replays.limits`); past that each goes to the task worker (queue "replays", one job per
    session, settings and rule however often the page is opened) and the page polls. Past
    CTXSIM_INSIGHTS_MAX_CALLS nothing is computed or queued, and the errors say why.

    A column the worker already has queued or running is not missing (issue 31): it is shown
    as pending, never computed here as well, and does not count against the bounds."""
    wanted, errors = _wanted(session, query)
    stored = stored_insights(session, [s.key for _, s in wanted], rule)
    missing = list({s.key: s for _, s in wanted if s.key not in stored}.values())
    jobs = _active_jobs(session, [s.key for s in missing], rule)
    missing = [s for s in missing if s.key not in jobs]
    calls = max(session.model_call_count, 1)
    limit = getattr(django_settings, "CTXSIM_INSIGHTS_MAX_CALLS", DEFAULT_INSIGHTS_MAX_CALLS)
    inline = getattr(django_settings, "CTXSIM_INSIGHTS_INLINE_CALLS",
                     DEFAULT_INSIGHTS_INLINE_CALLS)
    work = len(missing) * calls
    if work > limit:
        errors["profiles"] = (
            f"this session is too long to compare {len(missing)} more profile(s): "
            f"{session.model_call_count} calls × {len(missing)} = {work} call replays, over "
            f"the {limit} one page may run, even in the background; choose fewer profiles, or "
            "run a sweep (it runs in the background)")
    elif work > inline:
        jobs.update({s.key: _queue_insights(session, s, rule, user) for s in missing})
    elif missing:
        with replay_slot(user):
            for settings in missing:
                stored[settings.key] = insights_for(session, settings, rule, canonical)
    columns = [Column(s.profile_ref, label, s, stored[s.key]) for label, s in wanted
               if s.key in stored]
    pending = [(label, jobs[s.key]) for label, s in wanted if s.key in jobs]
    return InsightsView(columns, errors, pending)


def _active_jobs(session, keys: list[str], rule: CacheRule) -> dict[str, InsightsJob]:
    """The worker's jobs for these settings keys that are queued or running (and not lost:
    within the job timeout), by key."""
    if not keys:
        return {}
    since = timezone.now() - insights_timeout()
    active = (InsightsJob.Status.QUEUED, InsightsJob.Status.RUNNING)
    rows = InsightsJob.objects.filter(session=session, key__in=keys, rule=rule_key(rule),
                                      status__in=active)
    if lifecycle.settle(among=list(rows)):  # a worker went away: queued again, or failed
        rows = rows.all()
    return {job.key: job for job in rows
            if job.status == InsightsJob.Status.RUNNING
            or (job.started_at or job.created_at) >= since}


@dataclass
class InsightsProgress:
    """What the insights page says while the worker computes: how many columns are ready and
    the jobs still queued or running (the page polls them: `ctxsim.jobs.poll`)."""

    ready: int
    total: int
    pending: list[tuple[str, InsightsJob]]

    @property
    def computing(self) -> bool:
        return bool(self.pending)


def _wanted(session, query: QueryDict) -> tuple[list[tuple[str, ReplaySettings]],
                                                dict[str, str]]:
    refs, with_current = profile_refs(query)
    errors: dict[str, str] = {}
    wanted: list[tuple[str, ReplaySettings]] = []
    if with_current:
        current, problems = session_settings(query, session)
        errors.update(problems)
        if current.config or current.stages is not None or current.profile_ref not in refs:
            wanted.append((f"current: {current.profile.name}", current))
    for ref in refs:
        settings, problems = settings_from_query({"profile": ref}, session.team,
                                                 session=session)
        if problems:
            errors[f"profiles ({ref})"] = problems.get("profile", "bad profile")
            continue
        wanted.append((settings.profile.name, settings))
    return wanted, errors


def _queue_insights(session, settings: ReplaySettings, rule: CacheRule,
                    user: Any = None) -> InsightsJob:
    """The worker's job for this column: the one already queued or running, else a new one
    (also in place of one that failed, or was lost, longer than the timeout ago), which is
    one of `user`'s pending jobs (`ctxsim.jobs.policy`: QueueFull past their quota)."""
    cache = {"model": rule.model, "lifetime": rule.lifetime, "price": rule.price_per_mtok}
    fields = {"query": settings.query(), "cache": cache}
    key = rule_key(rule)
    timeout = insights_timeout()
    found = InsightsJob.objects.filter(session=session, key=settings.key, rule=key).first()
    if found is not None and found.status == InsightsJob.Status.RUNNING:
        if lifecycle.settle(among=[found]):
            found.refresh_from_db()  # its worker went away: queued again (or failed)
        return found  # running (beating), or just queued again with its task
    done = InsightsJob.Status.DONE  # its result is missing: computed again
    if found is None or found.status == done or timezone.now() - (
            found.started_at or found.created_at) > timeout:
        policy.admit("insights", user, session.team)  # a new job, not one to join
    job, created = InsightsJob.objects.get_or_create(
        session=session, key=settings.key, rule=key,
        defaults={**fields, "user_id": policy.user_id(user)})
    since = job.started_at or job.created_at
    if not created:
        if job.status != done and timezone.now() - since <= timeout:
            return job  # queued, running or failed recently: never queued twice
        reset = InsightsJob.objects.filter(pk=job.pk, status=job.status,
                                           started_at=job.started_at)
        if not reset.update(status=InsightsJob.Status.QUEUED, message="", started_at=None,
                            created_at=timezone.now(), **fields):
            job.refresh_from_db()
            return job  # another request took it over
        job.refresh_from_db()

    transaction.on_commit(lambda: enqueue_insights(job))
    return job


@dataclass
class RecordedView:
    """The provider's recorded cache figures beside the simulation of profile `none` (the
    session's own behaviour, SPEC §11), per call and in total."""

    comparison: RecordedComparison
    rows: list[dict[str, Any]]


def recorded_view(session, columns: list[Column], rule: CacheRule,
                  canonical=None) -> RecordedView | None:
    """None when the transcript records no usage per call, or when profile `none` is not
    computed yet and too long to compute in the request."""
    canonical = canonical or replays.canonical_session(session)
    recorded = recorded_per_call(canonical.messages)
    if not any(recorded):
        return None
    column = next((c for c in columns if c.ref == "none"), None)
    settings = column.settings if column else settings_from_query({"profile": "none"},
                                                                   session.team,
                                                                   session=session)[0]
    if column is not None:
        insights = column.insights
    else:  # stored, or computed here within the page's inline bound, or not shown yet
        found = stored_insights(session, [settings.key], rule).get(settings.key)
        inline = getattr(django_settings, "CTXSIM_INSIGHTS_INLINE_CALLS",
                         DEFAULT_INSIGHTS_INLINE_CALLS)
        if found is None and session.model_call_count > inline:
            return None
        insights = found or insights_for(session, settings, rule, canonical)
    calls = insights.calls
    per_call = [recorded[i] if i < len(recorded) else None for i in range(len(calls))]
    rc = settings.run_config()
    cal = calibrate(canonical.messages, settings.counter, image_rule=rc.values["image_rule"],
                    tools=canonical.tools, response_schema=canonical.response_schema,
                    provider=canonical.meta.get("provider"))
    comparison = compare(per_call, calls, rule, cal.a if cal else None, cal.b if cal else None)
    if comparison is None:
        return None
    simulated = {c.index: c for c in calls}
    rows = [{"call": r.call_index, "recorded": r, "simulated": simulated.get(r.call_index)}
            for r in comparison.calls]
    return RecordedView(comparison, rows)


def profile_options(team) -> list[tuple[str, str]]:
    return profiles.profile_choices(team)


def call_link(session, column: Column, call: int) -> str:
    """The lead's session page at one call, under this column's settings."""
    return f"{reverse('session-detail', args=[session.pk])}?{column.settings.query(call)}"


# --- sweeps ------------------------------------------------------------------------------------


@dataclass
class SweepForm:
    settings: ReplaySettings
    params: list[sweeps.SweepParam]
    cache: CacheChoice
    values: dict[str, str]

    @property
    def axis_fields(self) -> list[dict[str, Any]]:
        return [{"n": n, "optional": n == "2", **{f: self.values[f"{f}{n}"] for f in AXIS_FIELDS}}
                for n in ("1", "2")]


AXIS_FIELDS = ("param", "start", "stop", "step")


def sweep_form(session, query: Mapping[str, Any]) -> tuple[SweepForm, dict[str, str]]:
    settings, errors = session_settings(query, session)
    cache, cache_errors = cache_choice(query)
    errors.update(cache_errors)
    params = sweeps.sweepable(settings.effective_stages)
    values = {f"{f}{n}": query.get(f"{f}{n}", "") for n in (1, 2) for f in AXIS_FIELDS}
    if not values["param1"] and params:
        first = params[0]
        values.update(param1=first.name, **_default_range(first, "1"))
    return SweepForm(settings, params, cache, values), errors


def _default_range(param: sweeps.SweepParam, n: str) -> dict[str, str]:
    base = param.default or 4
    step = max(1, base // 2)
    return {f"start{n}": str(max(1, base - step)), f"stop{n}": str(base + step),
            f"step{n}": str(step)}


def parse_axes(form: SweepForm, query: Mapping[str, Any]) -> tuple[list[sweeps.Axis],
                                                                   dict[str, str]]:
    known = {p.name for p in form.params}
    axes, errors = [], {}
    for n in (1, 2):
        name = (query.get(f"param{n}") or "").strip()
        if not name:
            if n == 1:
                errors["param1"] = "choose a parameter to sweep"
            continue
        if name not in known:
            errors[f"param{n}"] = f"{name!r} is not an integer parameter of this profile"
            continue
        if any(a.name == name for a in axes):
            errors[f"param{n}"] = "choose two different parameters"
            continue
        numbers = []
        for field in ("start", "stop", "step"):
            text = (query.get(f"{field}{n}") or "").strip()
            try:
                numbers.append(int(text))
            except ValueError:
                errors[f"{field}{n}"] = f"{text!r} is not a whole number"
        if len(numbers) == 3:
            try:
                axes.append(sweeps.axis(name, *numbers))
            except sweeps.SweepError as exc:
                errors[f"param{n}"] = next(iter(exc.errors.values()))
    if axes and not errors:
        try:
            sweeps.grid(axes)
        except sweeps.SweepError as exc:
            errors.update(exc.errors)
    return axes, errors


def create_sweep(session, user, form: SweepForm, axes: list[sweeps.Axis]) -> Sweep:
    """Store the sweep; run it now when small, else hand it to the worker (one of `user`'s
    pending jobs: `ctxsim.jobs.policy`, QueueFull past their or their team's quota)."""
    total = 1
    for a in axes:
        total *= len(a.values)
    limit = getattr(django_settings, "CTXSIM_INLINE_SWEEP_WORK", INLINE_SWEEP_WORK)
    inline = total * max(session.model_call_count, 1) <= limit
    if not inline:
        policy.admit("sweep", user, session.team)
    sweep = Sweep.objects.create(
        session=session, user=user if user.is_authenticated else None,
        query=form.settings.query(), axes=[{"name": a.name, "values": list(a.values)}
                                           for a in axes],
        cache=form.cache.as_dict(), total=total,
    )
    if inline:
        run_sweep_job(sweep.pk)
        sweep.refresh_from_db()
    else:
        transaction.on_commit(lambda: enqueue_sweep(sweep))
    return sweep


def apply_query(sweep: Sweep, values: Mapping[str, int]) -> str:
    """The session page's query with a sweep point's values as the current parameters."""
    settings, _ = session_settings(QueryDict(sweep.query), sweep.session)
    settings = settings.with_config(sweeps.with_point(settings.config, values))
    return settings.query()


def sweep_points(session, sweep: Sweep) -> list[dict[str, Any]]:
    """The points with their labels and apply links, for the table and the chart."""
    page = reverse("session-detail", args=[session.pk])
    out = []
    for n, p in enumerate(sweep.points):
        out.append({**p, "n": n, "label": sweeps.point_label(p["values"]),
                    "lost": p["lost_references"] + p["rereads"],
                    "apply": f"{page}?{apply_query(sweep, p['values'])}"})
    return out


# What makes two sweep points come out alike.
OUTCOME = ("sent_tokens", "cost", "lost")


def chart_data(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The chart's points: one per outcome (points that came out alike are drawn once)."""
    ok = sweeps.merge_alike([p for p in points if not p["error"]], OUTCOME)
    return {
        "points": [{"x": p["sent_tokens"], "y": round(p["cost"], 6), "lost": p["lost"],
                    "label": p["label"], "apply": p["apply"], "front": p["front"]} for p in ok],
        "maxLost": max((p["lost"] for p in ok), default=0),
    }


def changes_nothing(points: list[dict[str, Any]]) -> bool:
    """Every value swept gave the same tokens, cost and loss."""
    return sweeps.one_outcome(points, OUTCOME)


MY_FIELDS = ("profiles", "model", "lifetime", "price")


def state_fields(query: QueryDict) -> list[tuple[str, str]]:
    """The session page's settings carried along (hidden fields), without this page's own."""
    return [(k, v) for k, values in query.lists() if k not in MY_FIELDS for v in values]


def insights_query(cache: CacheChoice, refs: list[str], extra: str = "") -> str:
    params = [("profiles", r) for r in refs] + cache.query()
    return urlencode(params) + (f"&{extra}" if extra else "")

