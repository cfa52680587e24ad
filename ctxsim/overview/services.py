"""The team overview and corpus sweeps: from a request's query to stored figures.

`build_overview` picks the sessions the filters select (the list's own filtering), queues what
is not stored yet — one task per (session, profile), in bulk — and sums what is: the page
opens at once and fills in as the worker stores figures. Corpus sweeps queue one task per
session and sum the parts into one front (`corpus`). The worker's side is `tasks.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

from ctxsim.analysis.choices import CacheChoice, cache_choice
from ctxsim.insights import sweep as sweeps
from ctxsim.jobs import lifecycle, policy
from ctxsim.overview import figures as fig
from ctxsim.overview.forms import OverviewFilterForm
from ctxsim.overview.models import CorpusSweep, CorpusSweepPart, SessionFigures, Status
from ctxsim.overview.tasks import (
    compute_figures_many,
    enqueue_many,
    run_corpus_part,
    shared_copies,
)
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
    key: str
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
    once: the row is created with the task, so the next request finds it queued), one task
    per column, each one of `user`'s pending jobs (`ctxsim.jobs.policy`: QueueFull past their
    quota, before anything is queued; by an API token, `api`, its team's)."""
    rows = session_rows(team, choice.filters)
    ids = list(rows.values_list("pk", flat=True))
    keys = {ref: fig.figures_key(settings, choice.cache) for ref, settings in choice.profiles}
    stored: dict[str, dict[int, tuple[str, dict]]] = {k: {} for k in keys.values()}
    cutoff = timezone.now() - transcripts.import_timeout()
    stuck = []
    for session_id, key, status, figures, started in SessionFigures.objects.filter(
            session__in=rows, key__in=list(keys.values())).values_list(
            "session_id", "key", "status", "figures", "started_at"):
        if status == Status.RUNNING and started is not None and started < cutoff:
            stuck.append((session_id, key))  # its worker went away: queue it again
            continue
        stored[key][session_id] = (status, figures)
    if stuck:
        _requeue(stuck)
    again = set(stuck)
    missing = [(sid, ref, key) for ref, key in keys.items() for sid in ids
               if sid not in stored[key] and (sid, key) not in again]
    if missing:
        _queue(missing, dict(choice.profiles), choice.cache, team, user, api)
    overview = Overview(choice, len(ids), queued_now=len(missing))
    for ref, settings in choice.profiles:
        key = keys[ref]
        found = stored[key].values()
        done = [f for status, f in found if status == Status.DONE]
        failed = sum(1 for status, _ in found if status == Status.FAILED)
        overview.columns.append(Column(ref, settings, key, fig.aggregate(done), len(done),
                                       failed, len(ids) - len(done) - failed))
    return overview


def _by_key(pairs: Sequence[tuple[int, str]]) -> dict[str, list[int]]:
    columns: dict[str, list[int]] = {}
    for session_id, key in pairs:
        columns.setdefault(key, []).append(session_id)
    return columns


def _queue(missing: Sequence[tuple[int, str, str]], settings: Mapping[str, ReplaySettings],
           cache: CacheChoice, team, user: Any, api: bool = False) -> None:
    """Create the rows and the tasks of each column, in one transaction (a worker sees both
    or neither). A pair another request queued meanwhile keeps its row; the second task
    finds it claimed and does nothing for it. The quota counts a column once: its helper
    tasks (`tasks.shared_copies`) do the same column's work, not more."""
    columns = _by_key([(sid, key) for sid, _, key in missing])
    policy.admit("overview", user, team, tasks=len(columns), api=api)
    rows = [SessionFigures(session_id=sid, key=key, query=settings[ref].query(),
                           cache=cache.as_dict()) for sid, ref, key in missing]
    with transaction.atomic():
        SessionFigures.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
        ids = enqueue_many(compute_figures_many, list(columns.items()))
        enqueue_many(compute_figures_many, shared_copies(columns))
        policy.record("overview", user, team, ids, api=api)


def _requeue(pairs: Sequence[tuple[int, str]]) -> None:
    """Queue again the pairs whose worker stopped without finishing (killed, restarted); the
    column tasks they were left by are settled as lost (`lifecycle.settle_tasks_of`)."""
    lost = set(pairs)
    lifecycle.settle_tasks_of(
        compute_figures_many.module_path,
        lambda args: len(args) == 2 and any((sid, args[0]) in lost for sid in args[1]),
        _LOST)
    with transaction.atomic():
        for session_id, key in pairs:
            SessionFigures.objects.filter(session_id=session_id, key=key,
                                          status=Status.RUNNING).update(
                status=Status.QUEUED, started_at=None)
        columns = _by_key(pairs)
        enqueue_many(compute_figures_many, [*columns.items(), *shared_copies(columns)])


_LOST = "the worker stopped: its rows were left running past the import timeout"


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
    """Store the sweep with one part per chosen session and queue the parts (in bulk). The
    sweep is one of `user`'s pending jobs (`ctxsim.jobs.policy`), ended with its last
    part's task."""
    ids = list(session_rows(team, form.choice.filters).values_list("pk", flat=True))
    if ids:
        policy.admit("corpus", user, team)
    with transaction.atomic():
        sweep = CorpusSweep.objects.create(
            team=team, created_by=user if user.is_authenticated else None,
            filters=form.choice.filter_query, query=form.settings.query(),
            axes=[{"name": a.name, "values": list(a.values)} for a in axes],
            cache=form.choice.cache.as_dict(), total=len(ids),
            status=Status.QUEUED if ids else Status.DONE,
        )
        CorpusSweepPart.objects.bulk_create(
            [CorpusSweepPart(sweep=sweep, session_id=sid) for sid in ids], batch_size=500)
        part_ids = sweep.parts.values_list("pk", flat=True)
        queued = enqueue_many(run_corpus_part, [(pk,) for pk in part_ids])
        policy.record("corpus", user, team, queued[-1:])
    return sweep


def cancel_corpus_sweep(sweep: CorpusSweep) -> bool:
    """Stop a running sweep: its queued parts are skipped by the worker (a part already
    running finishes, and is not summed)."""
    with transaction.atomic():
        stopped = CorpusSweep.objects.filter(
            pk=sweep.pk, status__in=(Status.QUEUED, Status.RUNNING)).update(
            status=Status.CANCELLED)
        if stopped:
            sweep.parts.filter(status=Status.QUEUED).update(status=Status.CANCELLED)
    return bool(stopped)


def corpus_progress(sweep: CorpusSweep) -> dict[str, int]:
    """Parts per status; parts left running by a worker that went away (past the import
    timeout) are queued again first, so the sweep does not wait for them forever."""
    if sweep.is_active:
        cutoff = timezone.now() - transcripts.import_timeout()
        stuck = list(sweep.parts.filter(status=Status.RUNNING, started_at__lt=cutoff)
                     .values_list("pk", flat=True))
        if stuck:
            lifecycle.settle_tasks_of(run_corpus_part.module_path,
                                      lambda args: bool(args) and args[0] in stuck, _LOST)
            with transaction.atomic():
                sweep.parts.filter(pk__in=stuck, status=Status.RUNNING).update(
                    status=Status.QUEUED, started_at=None)
                enqueue_many(run_corpus_part, [(pk,) for pk in stuck])
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
