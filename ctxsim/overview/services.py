"""The team overview and corpus sweeps: from a request's query to stored figures.

`build_overview` picks the sessions the filters select (the list's own filtering), queues what
is not stored yet — one task per (session, profile), in bulk — and sums what is: the page
opens at once and fills in as the worker stores figures. Corpus sweeps queue one task per
session and sum the parts into one front (`corpus`). The worker's side is `tasks.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

from ctxsim.analysis import results
from ctxsim.analysis.choices import CacheChoice, cache_choice
from ctxsim.analysis.models import SessionResult
from ctxsim.insights import sweep as sweeps
from ctxsim.jobs import lifecycle, policy
from ctxsim.jobs.models import PENDING, Job, bulk_create_kind
from ctxsim.overview import figures as fig
from ctxsim.overview.forms import OverviewFilterForm
from ctxsim.overview.models import ColumnTask, CorpusSweep, CorpusSweepPart, Status
from ctxsim.overview.tasks import compute_column, enqueue_many, run_corpus_part, shared_copies
from ctxsim.pipeline.params import env_var_of
from ctxsim.replays import profiles
from ctxsim.replays.models import SavedProfile
from ctxsim.replays.state import ReplaySettings, settings_from_query
from ctxsim.transcripts import services as transcripts
from ctxsim.transcripts.models import Session

MAX_PROFILES = 4
DEFAULT_PROFILES = ("none", "chatcli")
FILTER_FIELDS = ("q", "contents", "format", "status", "uploader", "project", "host", "since",
                 "until")
CACHE_FIELDS = ("model", "lifetime", "price")
CURRENT = "current"  # the column of settings given in the query itself


# --- what the request asks for -----------------------------------------------------------------


@dataclass
class Choice:
    """The sessions, profiles and cache rule an overview (or a corpus sweep) is over."""

    form: OverviewFilterForm
    filters: transcripts.SessionFilters
    profiles: list[tuple[str, ReplaySettings]]
    cache: CacheChoice
    errors: dict[str, str]

    @property
    def filter_query(self) -> str:
        return filter_query(self.form.data)

    @property
    def refs(self) -> list[str]:
        return [ref for ref, _ in self.profiles]

    @property
    def state_fields(self) -> list[tuple[str, str]]:
        """The query's own settings (the "current" column), for the form to carry along."""
        for ref, settings in self.profiles:
            if ref == CURRENT:
                return parse_qsl(settings.query())
        return []


def filter_query(query: Mapping[str, Any]) -> str:
    return urlencode([(k, query.get(k)) for k in FILTER_FIELDS if query.get(k)])


def parse_choice(team, query: QueryDict, *, default_profiles: Sequence[str] = DEFAULT_PROFILES,
                 max_profiles: int = MAX_PROFILES) -> Choice:
    """Filters, profiles (up to `max_profiles`, built-in or the team's) and cache rule; bad
    values are reported and left out, never an error page."""
    uploaders = list(team.memberships.order_by("user__username")
                     .values_list("user__username", flat=True))
    form = OverviewFilterForm(query, formats=transcripts.team_formats(team), uploaders=uploaders)
    filters = transcripts.SessionFilters(
        format=form.value("format"), status=form.value("status"), query=form.value("q"),
        contents=bool(form.is_valid() and form.cleaned_data.get("contents")),
        uploader=form.value("uploader"), since=form.date("since"), until=form.date("until"),
        project=form.value("project"), host=form.value("host"),
    )
    cache, errors = cache_choice(query)
    # A bad filter value filters nothing (as on the list) and says so.
    errors.update({name: " ".join(problems) for name, problems in form.errors.items()})
    refs = list(dict.fromkeys(r for r in query.getlist("profiles") if r)) or list(
        default_profiles)
    if len(refs) > max_profiles:
        errors["profiles"] = f"at most {max_profiles} profiles at once; showing the first"
        refs = refs[:max_profiles]
    chosen = []
    if "profile" in query:
        # Settings of their own (a sweep point's link): a column before the chosen profiles.
        current, problems = settings_from_query(query, team)
        errors.update(problems)
        chosen.append((CURRENT, current))
        refs = refs[:max_profiles - 1]
    for ref in refs:
        settings, problems = settings_from_query({"profile": ref}, team)
        if problems:
            errors[f"profiles ({ref})"] = problems.get("profile", "bad profile")
            continue
        chosen.append((ref, settings))
    return Choice(form, filters, chosen, cache, errors)


def session_rows(team, filters: transcripts.SessionFilters) -> QuerySet[Session]:
    """The sessions the filters pick: the list's top-level sessions and their sidechains
    (a subagent's calls are billed too)."""
    top = transcripts.filter_sessions(team, filters).values("pk")
    return Session.objects.filter(team=team).filter(
        Q(pk__in=top) | Q(parent__in=top) | Q(parent__parent__in=top))


# --- the overview ------------------------------------------------------------------------------


@dataclass
class Column:
    """One profile over the chosen sessions: the summed figures of those stored so far."""

    ref: str
    settings: ReplaySettings
    key: tuple[str, str]  # the stored results' (run key, cache rule)
    totals: dict[str, Any]
    done: int = 0
    failed: int = 0
    pending: int = 0

    @property
    def label(self) -> str:
        if self.ref == CURRENT:
            config = dict(self.settings.config)
            env = config.pop("env", None) or {}
            parts = [f"{_short(k)}={v}" for k, v in sorted([*config.items(), *env.items()])]
            return f"{self.settings.profile.name} ({', '.join(parts) or 'as the profile'})"
        return self.settings.profile.name


@dataclass
class Overview:
    choice: Choice
    sessions: int
    columns: list[Column] = field(default_factory=list)
    queued_now: int = 0

    @property
    def total(self) -> int:
        return self.sessions * len(self.columns)

    @property
    def done(self) -> int:
        return sum(c.done + c.failed for c in self.columns)

    @property
    def complete(self) -> bool:
        return self.done >= self.total

    @property
    def percent(self) -> int:
        return self.done * 100 // self.total if self.total else 100

    def histogram(self) -> dict[str, Any]:
        return fig.histogram([c.totals["peaks"] for c in self.columns])

    def histogram_rows(self) -> list[dict[str, Any]]:
        h = self.histogram()
        edges = h["edges"]
        return [{"low": edges[i], "high": edges[i + 1], "counts": [c[i] for c in h["counts"]]}
                for i in range(len(edges) - 1)]

    def tools(self) -> list[dict[str, Any]]:
        """Rows of the tokens-by-tool table: the biggest tools, then the rest as "other"."""
        names = fig.top_tools([c.totals["by_tool"] for c in self.columns])
        rows = [{"tool": t, "tokens": [c.totals["by_tool"].get(t, 0) for c in self.columns]}
                for t in names]
        rest = [sum(n for t, n in c.totals["by_tool"].items() if t not in names)
                for c in self.columns]
        if any(rest):
            rows.append({"tool": "other tools", "tokens": rest, "other": True})
        return rows

    def chart_data(self) -> dict[str, Any]:
        return {"labels": [c.label for c in self.columns], "histogram": self.histogram(),
                "tools": self.tools()}


def build_overview(team, choice: Choice, user: Any = None, *, api: bool = False) -> Overview:
    """Sum what is stored for the chosen sessions and profiles; queue the rest (each pair
    once: the row is created with its column's job, so the next request finds it pending),
    one job per column (and its helper copies), each column one of `user`'s pending jobs
    (`ctxsim.jobs.policy`: QueueFull past their quota, before anything is queued; by an API
    token, `api`, its team's). A column job whose worker went away is settled here as every
    kind is (`ctxsim.jobs.lifecycle`); its rows wait for its next attempt."""
    rows = session_rows(team, choice.filters)
    ids = list(rows.values_list("pk", flat=True))
    keys = {ref: fig.figures_key(settings, choice.cache) for ref, settings in choice.profiles}
    states = _states(rows, keys.values())
    missing = [(sid, ref, key) for ref, key in keys.items() for sid in ids
               if states[key].get(sid, (results.MISSING,))[0] == results.MISSING]
    if missing:
        _queue(missing, dict(choice.profiles), choice.cache, team, user, api)
    overview = Overview(choice, len(ids), queued_now=len(missing))
    for ref, settings in choice.profiles:
        key = keys[ref]
        found = states[key].values()
        done = [f for state, f in found if state == results.DONE]
        failed = sum(1 for state, _ in found if state == results.FAILED)
        overview.columns.append(Column(ref, settings, key, fig.aggregate(done), len(done),
                                       failed, len(ids) - len(done) - failed))
    return overview


def _states(rows: QuerySet[Session], keys: Iterable[tuple[str, str]]
            ) -> dict[tuple[str, str], dict[int, tuple[str, Any]]]:
    """Per (run key, rule), each stored session's figures state and figures; the running
    jobs computing them are settled first when their worker went away."""
    keys = list(keys)
    out: dict[tuple[str, str], dict[int, tuple[str, Any]]] = {k: {} for k in keys}
    if not keys:
        return out
    found = SessionResult.objects.filter(
        session__in=rows, rule__in={r for _, r in keys}, key__in={k for k, _ in keys}).values_list(
        "session_id", "key", "rule", "figures_version", "figures", "message", "job_id",
        "job__status", "job__message")
    running = {row[6] for row in found if row[7] == Status.RUNNING}
    if running and lifecycle.settle(among=list(Job.objects.filter(pk__in=running))):
        found = found.all()  # queued again (or failed): read what they say now
    for sid, key, rule, version, figures, message, _, status, why in found:
        if (key, rule) in out:
            state, text = results.figures_state(version, fig.FIGURES_VERSION, figures, message,
                                                status, why)
            out[key, rule][sid] = (state, figures if state == results.DONE else text)
    return out


def _queue(missing: Sequence[tuple[int, str, tuple[str, str]]],
           settings: Mapping[str, ReplaySettings], cache: CacheChoice, team, user: Any,
           api: bool = False) -> None:
    """Create each column's jobs (its task and its helper copies, `tasks.shared_copies`),
    the rows they are queued for and their tasks, in one transaction (a worker sees all or
    none). A pair another request queued meanwhile keeps its row and job; this column's
    tasks find it claimed and leave it. The quota counts a column once: its helper copies do
    the same column's work, not more (`Job.counted`)."""
    columns: dict[tuple[str, str], list[int]] = {}
    for sid, _, key in missing:
        columns.setdefault(key, []).append(sid)
    policy.admit("overview", user, team, tasks=len(columns), api=api)
    query = {key: settings[ref].query() for _, ref, key in missing}
    uid = policy.user_id(user)
    with transaction.atomic():
        lead: dict[tuple[str, str], ColumnTask] = {}
        jobs = []
        for key, ids in [*columns.items(), *shared_copies(columns)]:
            job = ColumnTask.objects.create(
                user_id=uid, team=team, key=key[0], rule=key[1], query=query[key],
                cache=cache.as_dict(), sessions=ids, total=len(ids), counted=key not in lead)
            lead.setdefault(key, job)
            jobs.append(job)
        SessionResult.objects.bulk_create(
            [SessionResult(session_id=sid, key=key[0], rule=key[1], job=lead[key])
             for sid, _, key in missing], batch_size=500, ignore_conflicts=True)
        for key, ids in columns.items():  # rows stored before (another version, or insights)
            SessionResult.objects.filter(
                Q(job__isnull=True) | ~Q(job__status__in=PENDING), key=key[0], rule=key[1],
                session_id__in=ids).exclude(job=lead[key]).update(job=lead[key], attempt=None)
        task_ids = enqueue_many(compute_column, [(job.pk,) for job in jobs])
        for job, task_id in zip(jobs, task_ids, strict=True):
            job.task_id = task_id[:64]
        Job.objects.bulk_update(jobs, ["task_id"])


def overview_json(overview: Overview) -> dict[str, Any]:
    """The overview's numbers as the API answers them."""
    return {
        "sessions": overview.sessions, "complete": overview.complete,
        "progress": {"done": overview.done, "total": overview.total},
        "profiles": [{"profile": c.ref, "name": c.label, "done": c.done, "failed": c.failed,
                      "pending": c.pending,
                      **{k: v for k, v in c.totals.items() if k != "peaks"}}
                     for c in overview.columns],
        "peak_histogram": overview.histogram(),
    }


# --- corpus sweeps -----------------------------------------------------------------------------


@dataclass
class CorpusForm:
    choice: Choice
    settings: ReplaySettings
    params: list[sweeps.SweepParam]
    values: dict[str, str]

    @property
    def axis_fields(self) -> list[dict[str, Any]]:
        return [{"n": n, "optional": n == "2",
                 **{f: self.values[f"{f}{n}"] for f in AXIS_FIELDS}} for n in ("1", "2")]


AXIS_FIELDS = ("param", "start", "stop", "step")


def corpus_form(team, query: QueryDict) -> CorpusForm:
    """The corpus sweep form: the overview's filters and cache rule, one profile to vary."""
    choice = parse_choice(team, query, default_profiles=("chatcli",), max_profiles=1)
    settings = choice.profiles[0][1] if choice.profiles else ReplaySettings()
    params = sweeps.sweepable(settings.effective_stages)
    values = {f"{f}{n}": query.get(f"{f}{n}", "") for n in (1, 2) for f in AXIS_FIELDS}
    if not values["param1"] and params:
        first = params[0]
        base = first.default or 4
        step = max(1, base // 2)
        values.update(param1=first.name, start1=str(max(1, base - step)),
                      stop1=str(base + step), step1=str(step))
    return CorpusForm(choice, settings, params, values)


def parse_axes(form: CorpusForm, query: Mapping[str, Any]):
    """The axes, as the per-session sweep reads them (same fields, same messages)."""
    from ctxsim.analysis.services import SweepForm
    from ctxsim.analysis.services import parse_axes as parse_session_axes

    return parse_session_axes(SweepForm(form.settings, form.params, form.choice.cache,
                                        form.values), query)


def create_corpus_sweep(team, user, form: CorpusForm, axes) -> CorpusSweep:
    """Store the sweep with one part per chosen session, each a job of its own, and queue
    the parts (in bulk). The sweep is one of `user`'s pending jobs (`ctxsim.jobs.policy`):
    its last part is the one counted."""
    ids = list(session_rows(team, form.choice.filters).values_list("pk", flat=True))
    if ids:
        policy.admit("corpus", user, team)
    uid = policy.user_id(user)
    with transaction.atomic():
        sweep = CorpusSweep.objects.create(
            team=team, created_by=user if user.is_authenticated else None,
            filters=form.choice.filter_query, query=form.settings.query(),
            axes=[{"name": a.name, "values": list(a.values)} for a in axes],
            cache=form.choice.cache.as_dict(), total=len(ids),
            status=Status.QUEUED if ids else Status.DONE,
        )
        parts = bulk_create_kind(CorpusSweepPart, [
            CorpusSweepPart(corpus=sweep, session_id=sid, team=team, user_id=uid,
                            counted=n == len(ids) - 1) for n, sid in enumerate(ids)])
        queued = enqueue_many(run_corpus_part, [(part.pk,) for part in parts])
        for part, task_id in zip(parts, queued, strict=True):
            part.task_id = task_id[:64]
        Job.objects.bulk_update(parts, ["task_id"], batch_size=500)
    return sweep


def cancel_corpus_sweep(sweep: CorpusSweep) -> bool:
    """Stop a running sweep: its queued parts are skipped by the worker (a part already
    running finishes, and is not summed)."""
    with transaction.atomic():
        stopped = CorpusSweep.objects.filter(
            pk=sweep.pk, status__in=(Status.QUEUED, Status.RUNNING)).update(
            status=Status.CANCELLED)
        if stopped:
            sweep.parts.filter(status=Status.QUEUED).update(status=Status.CANCELLED,
                                                            finished_at=timezone.now())
    return bool(stopped)


def corpus_progress(sweep: CorpusSweep) -> dict[str, int]:
    """Parts per status; parts whose worker went away are settled first, as every kind of job
    is (`ctxsim.jobs.lifecycle`: queued again once, then failed), so the sweep does not wait
    for them forever."""
    if sweep.is_active:
        running = Job.objects.filter(corpussweeppart__corpus=sweep, status=Status.RUNNING)
        lifecycle.settle(among=list(running))
    counts = dict.fromkeys(Status.values, 0)
    for status in sweep.parts.values_list("status", flat=True):
        counts[status] += 1
    finished = counts[Status.DONE] + counts[Status.FAILED]
    percent = finished * 100 // sweep.total if sweep.total else 100
    return {**counts, "finished": finished, "percent": percent}


def point_settings(sweep: CorpusSweep, values: Mapping[str, int]) -> ReplaySettings:
    settings, _ = settings_from_query(QueryDict(sweep.query), sweep.team)
    return settings.with_config(sweeps.with_point(settings.config, values))


def corpus_points(sweep: CorpusSweep) -> list[dict[str, Any]]:
    """The points with their labels, for the table and the chart."""
    base, _ = settings_from_query(QueryDict(sweep.query), sweep.team)
    cache = urlencode(CacheChoice(**sweep.cache).query())
    out = []
    for n, p in enumerate(sweep.points):
        label = sweeps.point_label(p["values"])
        settings = point_settings(sweep, p["values"])
        query = "&".join(filter(None, [sweep.filters, settings.query(),
                                       urlencode([("profiles", base.profile_ref)]), cache]))
        out.append({**p, "n": n, "label": label,
                    "overview": f"{reverse('team-overview')}?{query}"})
    return out


def _short(name: str) -> str:
    return (env_var_of(name) or name).removeprefix("CHATCLI_")


# What makes two corpus sweep points come out alike.
CORPUS_OUTCOME = ("sent_tokens", "cost", "lost")


def corpus_chart(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chart's points: one per outcome (points that came out alike are drawn once)."""
    ok = sweeps.merge_alike([dict(p) for p in points if not p["errors"]], CORPUS_OUTCOME)
    return {"points": [{"x": round(p["cost"], 6), "y": p["lost"], "label": p["label"],
                        "front": p["front"], "n": p["n"]} for p in ok]}


def corpus_changes_nothing(points: Sequence[Mapping[str, Any]]) -> bool:
    """Every value swept gave the same tokens, cost and loss over the sessions."""
    return sweeps.one_outcome([{**p, "error": p["errors"]} for p in points], CORPUS_OUTCOME)


def apply_point(sweep: CorpusSweep, user, n: int, name: str,
                description: str = "") -> SavedProfile:
    """Save point `n` of a finished sweep as a team profile (ProfileError on a bad name)."""
    if sweep.status != Status.DONE or not 0 <= n < len(sweep.points):
        raise profiles.ProfileError({"point": "no such point in this sweep"})
    point = sweep.points[n]
    return profiles.save_team_profile(sweep.team, user, point_settings(sweep, point["values"]),
                                      name, description)


def overview_link(sweep: CorpusSweep, saved: SavedProfile) -> str:
    """The overview of the sweep's sessions under the saved point and the base profile."""
    base, _ = settings_from_query(QueryDict(sweep.query), sweep.team)
    query = "&".join(filter(None, [sweep.filters, urlencode(
        [("profiles", saved.ref), ("profiles", base.profile_ref),
         *CacheChoice(**sweep.cache).query()])]))
    return f"{reverse('team-overview')}?{query}"
